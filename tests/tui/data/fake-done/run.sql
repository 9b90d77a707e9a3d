BEGIN TRANSACTION;
CREATE TABLE commands (
  id         INTEGER PRIMARY KEY,
  t          REAL NOT NULL,
  kind       TEXT NOT NULL,
  args       TEXT NOT NULL DEFAULT '{}',
  source     TEXT NOT NULL DEFAULT '',
  status     TEXT NOT NULL DEFAULT 'pending',
  handled_at REAL,
  result     TEXT NOT NULL DEFAULT '',
  seal       TEXT NOT NULL DEFAULT ''
);
CREATE TABLE events (
  id      INTEGER PRIMARY KEY,
  t       REAL NOT NULL,
  version INTEGER,
  level   TEXT NOT NULL,
  kind    TEXT NOT NULL,
  message TEXT NOT NULL,
  data    TEXT
);
INSERT INTO "events" VALUES(1,1.79533800000108265874e+09,NULL,'info','init','created from @REPO@ at 131e8a008a24',NULL);
INSERT INTO "events" VALUES(2,1.7953380000954227447e+09,NULL,'info','engine','engine started (pid 28653, proposer command)',NULL);
INSERT INTO "events" VALUES(3,1.79533800020631980893e+09,0,'info','baseline','measuring the unmodified baseline',NULL);
INSERT INTO "events" VALUES(4,1.79533800067252755161e+09,0,'info','decision_cost','one decision takes about 0.6 s for a clear change (4 ABBA rounds of 2 runs) and 0.6 s (4 ABBA rounds of 2 runs) for no change; 0.1 s per run, run-to-run noise 0.096%',NULL);
INSERT INTO "events" VALUES(5,1.795338000795027256e+09,0,'info','verdict','v0: baseline: baseline over 4 configs in 2 classes',NULL);
INSERT INTO "events" VALUES(6,1.79533800083365154267e+09,1,'info','iteration','v1 started from 131e8a008a',NULL);
INSERT INTO "events" VALUES(7,1.79533800123367404937e+09,1,'info','plan','v1: gain5: scripted hypothesis for v1 [global]',NULL);
INSERT INTO "events" VALUES(8,1.79533800123401427262e+09,1,'warn','plan','v1: the plan uncited: the plan names no config class, profiled kernel or metric from the context pack',NULL);
INSERT INTO "events" VALUES(9,1.79533800299437069892e+09,1,'info','decision','v1 eval: keep: cls=large −5.0% faster (every class improved) (4 rounds, 0.8 GPU-s)',NULL);
INSERT INTO "events" VALUES(10,1.79533800401314878468e+09,1,'info','decision','v1 reverify: keep: cls=large −5.0% faster (every class improved) (4 rounds, 0.6 GPU-s)',NULL);
INSERT INTO "events" VALUES(11,1.79533800401426458354e+09,1,'info','reverify','v1: fresh processes say keep: cls=large −5.0% faster (every class improved)',NULL);
INSERT INTO "events" VALUES(12,1.79533800408250594142e+09,1,'info','verdict','v1: keep: cls=large −5.0% faster (every class improved); confirmed in fresh processes (cls=large −5.0% faster (every class improved))',NULL);
INSERT INTO "events" VALUES(13,1.7953380041235134602e+09,2,'info','iteration','v2 started from 877d144b65',NULL);
INSERT INTO "events" VALUES(14,1.79533800448145556454e+09,2,'info','plan','v2: loss5: scripted hypothesis for v2 [global]',NULL);
INSERT INTO "events" VALUES(15,1.7953380057090032101e+09,2,'info','decision','v2 eval: regression: cls=small +5.2% slower (3 rounds, 0.8 GPU-s)',NULL);
INSERT INTO "events" VALUES(16,1.79533800571156787872e+09,2,'warn','verdict','v2: regression: cls=small +5.2% slower',NULL);
INSERT INTO "events" VALUES(17,1.79533800577498984336e+09,3,'info','iteration','v3 started from 877d144b65',NULL);
INSERT INTO "events" VALUES(18,1.79533800627665901181e+09,3,'info','plan','v3: gain1: scripted hypothesis for v3 [global]',NULL);
INSERT INTO "events" VALUES(19,1.79533800627723598482e+09,3,'warn','plan','v3: the plan uncited: the plan names no config class, profiled kernel or metric from the context pack',NULL);
INSERT INTO "events" VALUES(20,1.79533800860911464691e+09,3,'info','decision','v3 eval: borderline: cls=small −0.9% undecided after 8 rounds (8 rounds, 1.3 GPU-s)',NULL);
INSERT INTO "events" VALUES(21,1.795338008612799406e+09,3,'warn','review','v3 is borderline: cls=small −0.9% undecided after 8 rounds; awaiting the engineer',NULL);
INSERT INTO "events" VALUES(22,1.79533801062611889833e+09,3,'warn','verdict','v3: rejected: no answer within 2 s: review_default is reject (cls=small −0.9% undecided after 8 rounds)',NULL);
INSERT INTO "events" VALUES(23,1795338010.65524,NULL,'info','stop','run stopped: --max-iters 3 reached in this session',NULL);
CREATE TABLE iterations (
  version            INTEGER PRIMARY KEY,
  status             TEXT NOT NULL,
  phase              TEXT NOT NULL DEFAULT '',
  masked             INTEGER NOT NULL DEFAULT 0,
  parent             INTEGER,
  hypothesis         TEXT NOT NULL DEFAULT '',
  target_class       TEXT,
  scope              TEXT NOT NULL DEFAULT 'global',
  commit_sha         TEXT,
  best_commit_before TEXT,
  repair_attempts    INTEGER NOT NULL DEFAULT 0,
  started_at         REAL NOT NULL,
  finished_at        REAL,
  record             TEXT NOT NULL DEFAULT '{}'
);
INSERT INTO "iterations" VALUES(0,'baseline','done',0,NULL,'baseline (unmodified)',NULL,'global','131e8a008a24a4b8d3f7c423f0be2e7210e2240a','131e8a008a24a4b8d3f7c423f0be2e7210e2240a',0,1.79533800015779566763e+09,1.79533800079435658459e+09,'{"timings": {"gate_wait_s": 0.0091, "total_s": 0.6366, "engine_s": 0.6275}, "gpu": {"before": null, "after": null, "host": "local", "name": "no GPU (CPU-only target)"}, "classes": {"cls=large": {"best": 166.24991981337564, "configs": 2}, "cls=small": {"best": 11.807166103565404, "configs": 2}}, "configs": {"shape=s0,cls=small,n=128": {"cls": "cls=small", "production": true, "row": {"shape": "s0", "cls": "small", "n": 128}}, "shape=s1,cls=small,n=256": {"cls": "cls=small", "production": true, "row": {"shape": "s1", "cls": "small", "n": 256}}, "shape=s2,cls=large,n=4096": {"cls": "cls=large", "production": true, "row": {"shape": "s2", "cls": "large", "n": 4096}}, "shape=s3,cls=large,n=8192": {"cls": "cls=large", "production": true, "row": {"shape": "s3", "cls": "large", "n": 8192}}}, "config_columns": ["shape", "cls", "n"], "decision": {"verdict": "baseline", "reason": "baseline over 4 configs in 2 classes", "by": "engine"}, "decision_cost": {"mode": "process", "round_s": 0.14793466000264743, "start_s": 0.0, "noise_pct": 0.09567531509577941, "rounds_tie": 4, "rounds_change": 4, "max_rounds": 8, "seconds_tie": 0.5917386400105897, "seconds_change": 0.5917386400105897, "seconds_max": 1.1834772800211795, "undecided_tie": false, "slow": false, "text": "one decision takes about 0.6 s for a clear change (4 ABBA rounds of 2 runs) and 0.6 s (4 ABBA rounds of 2 runs) for no change; 0.1 s per run, run-to-run noise 0.096%"}, "seal": "d05d18d218e195efe550a4dca90c950f711433a5c4b73c2c6605688e11d17fc0"}');
INSERT INTO "iterations" VALUES(1,'keep','done',0,0,'gain5: scripted hypothesis for v1',NULL,'global','877d144b6518106b3c05b2bb55e93557773d63ba','131e8a008a24a4b8d3f7c423f0be2e7210e2240a',0,1.79533800083293819428e+09,1.79533800408155918117e+09,'{"lane": 0, "timings": {"gate_wait_s": 0.0233, "proposer_s": 0.3904, "police_s": 0.4704, "looks_s": [0.3781, 0.2594, 0.3028, 0.2994, 0.2398, 0.2466, 0.2512, 0.2351], "reverify_s": 1.0178, "commit_s": 0.0666, "total_s": 3.2486, "engine_s": 0.6225}, "proposal": {"command": "/work/wt-surfaces/.venv/bin/python /work/wt-surfaces/tests/tui/fixture_agent.py", "exit": 0, "seconds": 0.4, "agent": {"agent": "command", "cost_usd": 0.0121, "input_tokens": 1234, "output_tokens": 117, "cache_read_tokens": 800, "cache_write_tokens": null, "reasoning_tokens": null, "session_id": "fixture-v1", "session_started": 1, "resumed": false, "model": null, "turns": null, "is_error": null, "wall_s": 0.375, "exit": 0, "transcript_path": "logs/v1/proposer.out", "transcript_bytes": 532, "transcript_cut": false, "notes": ["reported in usage.json"], "tokens": 1351}}, "plan": {"ok": true, "hypothesis": "gain5: scripted hypothesis for v1", "target_class": null, "scope": "global", "flags": ["uncited"], "reason": "the plan names no config class, profiled kernel or metric from the context pack", "citations": []}, "forced_paths": [], "changed_files": ["kernel.json"], "diff_scan": {"findings": [], "reason": ""}, "bench_runs": {"eval": [{"side": "best", "round": 0, "wall_s": 0.0685092160001659, "timed_s": null}, {"side": "cand", "round": 0, "wall_s": 0.20608600199921057, "timed_s": null}, {"side": "cand", "round": 1, "wall_s": 0.0717207090001466, "timed_s": null}, {"side": "best", "round": 1, "wall_s": 0.0713582549997227, "timed_s": null}, {"side": "best", "round": 2, "wall_s": 0.07116713000141317, "timed_s": null}, {"side": "cand", "round": 2, "wall_s": 0.12346856099975412, "timed_s": null}, {"side": "cand", "round": 3, "wall_s": 0.07028346900006, "timed_s": null}, {"side": "best", "round": 3, "wall_s": 0.12635684199995012, "timed_s": null}], "reverify": [{"side": "best", "round": 0, "wall_s": 0.07372771300106251, "timed_s": null}, {"side": "cand", "round": 0, "wall_s": 0.0704164460003085, "timed_s": null}, {"side": "cand", "round": 1, "wall_s": 0.0743327340005635, "timed_s": null}, {"side": "best", "round": 1, "wall_s": 0.06813572600003681, "timed_s": null}, {"side": "best", "round": 2, "wall_s": 0.07640072799949849, "timed_s": null}, {"side": "cand", "round": 2, "wall_s": 0.07321910499922524, "timed_s": null}, {"side": "cand", "round": 3, "wall_s": 0.07217252800001006, "timed_s": null}, {"side": "best", "round": 3, "wall_s": 0.07413666700085741, "timed_s": null}]}, "evaluated_tree": "6496220ca76f69ca84d28898b444535c49f92531", "gpu": {"before": null, "after": null, "host": "local", "name": "no GPU (CPU-only target)"}, "gpu_seconds": {"eval": 0.8089501840004232, "reverify": 0.5825416470015625}, "classes": {"cls=large": {"cls": "cls=large", "rounds": 4, "n": 4, "best": 166.07948243544757, "cand": 157.81726298395085, "ratio": 0.9502514137788921, "lo": 0.9377683783264962, "hi": 0.9629006162483332, "verdict": "improved", "outliers": 0, "disturbed": 0, "unit": "sample", "plausible_lo": null, "plausible_hi": null, "delta_pct": -4.974858622110789, "interval": [0.9377683783264962, 0.9629006162483332]}, "cls=small": {"cls": "cls=small", "rounds": 4, "n": 4, "best": 11.829763416030492, "cand": 11.245419008351725, "ratio": 0.9506038804726286, "lo": 0.9421606077498901, "hi": 0.9591228184839433, "verdict": "improved", "outliers": 0, "disturbed": 0, "unit": "sample", "plausible_lo": null, "plausible_hi": null, "delta_pct": -4.939611952737144, "interval": [0.9421606077498901, 0.9591228184839433]}}, "decision": {"verdict": "keep", "reason": "cls=large \u22125.0% faster (every class improved); confirmed in fresh processes (cls=large \u22125.0% faster (every class improved))", "rounds": 4, "gpu_seconds": 0.8089501840004232, "flags": [], "focus": "cls=large", "classes": {"cls=large": {"cls": "cls=large", "rounds": 4, "n": 4, "best": 166.16272355672584, "cand": 157.88444593012474, "ratio": 0.950179694642673, "lo": 0.9326243855026312, "hi": 0.9680654571611523, "verdict": "improved", "outliers": 0, "disturbed": 0, "unit": "sample", "plausible_lo": null, "plausible_hi": null, "delta_pct": -4.9820305357326955, "interval": [0.9326243855026312, 0.9680654571611523]}, "cls=small": {"cls": "cls=small", "rounds": 4, "n": 4, "best": 11.82134644186385, "cand": 11.236668994733428, "ratio": 0.9505405369848686, "lo": 0.9376145729097214, "hi": 0.9636446985327295, "verdict": "improved", "outliers": 0, "disturbed": 0, "unit": "sample", "plausible_lo": null, "plausible_hi": null, "delta_pct": -4.945946301513137, "interval": [0.9376145729097214, 0.9636446985327295]}}, "by": "engine"}, "reverify": {"verdict": "keep", "reason": "cls=large \u22125.0% faster (every class improved)", "rounds": 4, "gpu_seconds": 0.5825416470015625, "flags": [], "focus": "cls=large", "classes": {"cls=large": {"cls": "cls=large", "rounds": 4, "n": 4, "best": 166.07948243544757, "cand": 157.81726298395085, "ratio": 0.9502514137788921, "lo": 0.9377683783264962, "hi": 0.9629006162483332, "verdict": "improved", "outliers": 0, "disturbed": 0, "unit": "sample", "plausible_lo": null, "plausible_hi": null, "delta_pct": -4.974858622110789, "interval": [0.9377683783264962, 0.9629006162483332]}, "cls=small": {"cls": "cls=small", "rounds": 4, "n": 4, "best": 11.829763416030492, "cand": 11.245419008351725, "ratio": 0.9506038804726286, "lo": 0.9421606077498901, "hi": 0.9591228184839433, "verdict": "improved", "outliers": 0, "disturbed": 0, "unit": "sample", "plausible_lo": null, "plausible_hi": null, "delta_pct": -4.939611952737144, "interval": [0.9421606077498901, 0.9591228184839433]}}, "agrees": true, "seconds": 1.02}, "commit_tree": "6496220ca76f69ca84d28898b444535c49f92531", "keep_status": "keep", "seal": "87333d8fff3b181448fd1b59a9aacfef3589292e47d7fff36d7806d523e178bd"}');
INSERT INTO "iterations" VALUES(2,'regression','done',0,1,'loss5: scripted hypothesis for v2',NULL,'global',NULL,'877d144b6518106b3c05b2bb55e93557773d63ba',0,1.79533800412297248842e+09,1.7953380057108588219e+09,'{"lane": 0, "timings": {"gate_wait_s": 0.0101, "proposer_s": 0.3489, "police_s": 0.1099, "looks_s": [0.5957, 0.2388, 0.2426], "total_s": 1.5879, "engine_s": 0.1518}, "proposal": {"command": "/work/wt-surfaces/.venv/bin/python /work/wt-surfaces/tests/tui/fixture_agent.py", "exit": 0, "seconds": 0.3, "agent": {"agent": "command", "cost_usd": 0.0221, "input_tokens": 2234, "output_tokens": 217, "cache_read_tokens": 1600, "cache_write_tokens": null, "reasoning_tokens": null, "session_id": "fixture-v2", "session_started": 2, "resumed": false, "model": null, "turns": null, "is_error": null, "wall_s": 0.33, "exit": 0, "transcript_path": "logs/v2/proposer.out", "transcript_bytes": 532, "transcript_cut": false, "notes": ["reported in usage.json"], "tokens": 2451}}, "plan": {"ok": true, "hypothesis": "loss5: scripted hypothesis for v2", "target_class": null, "scope": "global", "flags": [], "reason": "", "citations": [{"kind": "class", "term": "cls=small", "evidence": "best 11.25 us, -4.8% vs baseline"}]}, "forced_paths": [], "changed_files": ["kernel.json"], "diff_scan": {"findings": [], "reason": ""}, "bench_runs": {"eval": [{"side": "best", "round": 0, "wall_s": 0.2699104080002144, "timed_s": null}, {"side": "cand", "round": 0, "wall_s": 0.20729236899933312, "timed_s": null}, {"side": "cand", "round": 1, "wall_s": 0.07130434400096419, "timed_s": null}, {"side": "best", "round": 1, "wall_s": 0.07210695399953693, "timed_s": null}, {"side": "best", "round": 2, "wall_s": 0.07261499100059154, "timed_s": null}, {"side": "cand", "round": 2, "wall_s": 0.07230995200006873, "timed_s": null}]}, "evaluated_tree": "047be5bda6227750cca7432796f153cd52bf7948", "gpu": {"before": null, "after": null, "host": "local", "name": "no GPU (CPU-only target)"}, "gpu_seconds": {"eval": 0.7655390180007089}, "classes": {"cls=large": {"cls": "cls=large", "rounds": 3, "n": 3, "best": 157.86313383537248, "cand": 165.55721672057933, "ratio": 1.0489902207340818, "lo": 1.0079046364054653, "hi": 1.0917505917227177, "verdict": "regressed", "outliers": 0, "disturbed": 0, "unit": "sample", "plausible_lo": null, "plausible_hi": null, "delta_pct": 4.899022073408177, "interval": [1.0079046364054653, 1.0917505917227177]}, "cls=small": {"cls": "cls=small", "rounds": 3, "n": 3, "best": 11.221466490681133, "cand": 11.79733563559289, "ratio": 1.0516217632831781, "lo": 1.0276433374009692, "hi": 1.0761596876673116, "verdict": "regressed", "outliers": 0, "disturbed": 0, "unit": "sample", "plausible_lo": null, "plausible_hi": null, "delta_pct": 5.1621763283178135, "interval": [1.0276433374009692, 1.0761596876673116]}}, "decision": {"verdict": "regression", "reason": "cls=small +5.2% slower", "rounds": 3, "gpu_seconds": 0.7655390180007089, "flags": [], "focus": "cls=small", "classes": {"cls=large": {"cls": "cls=large", "rounds": 3, "n": 3, "best": 157.86313383537248, "cand": 165.55721672057933, "ratio": 1.0489902207340818, "lo": 1.0079046364054653, "hi": 1.0917505917227177, "verdict": "regressed", "outliers": 0, "disturbed": 0, "unit": "sample", "plausible_lo": null, "plausible_hi": null, "delta_pct": 4.899022073408177, "interval": [1.0079046364054653, 1.0917505917227177]}, "cls=small": {"cls": "cls=small", "rounds": 3, "n": 3, "best": 11.221466490681133, "cand": 11.79733563559289, "ratio": 1.0516217632831781, "lo": 1.0276433374009692, "hi": 1.0761596876673116, "verdict": "regressed", "outliers": 0, "disturbed": 0, "unit": "sample", "plausible_lo": null, "plausible_hi": null, "delta_pct": 5.1621763283178135, "interval": [1.0276433374009692, 1.0761596876673116]}}, "by": "engine"}}');
INSERT INTO "iterations" VALUES(3,'rejected','done',0,1,'gain1: scripted hypothesis for v3',NULL,'global',NULL,'877d144b6518106b3c05b2bb55e93557773d63ba',0,1.79533800577432799336e+09,1.79533801062495756151e+09,'{"lane": 0, "timings": {"gate_wait_s": 0.0233, "proposer_s": 0.491, "police_s": 0.1133, "looks_s": [0.4004, 0.2591, 0.2532, 0.258, 0.2538, 0.2323, 0.2354, 0.242], "total_s": 4.8506, "engine_s": 2.2021}, "proposal": {"command": "/work/wt-surfaces/.venv/bin/python /work/wt-surfaces/tests/tui/fixture_agent.py", "exit": 0, "seconds": 0.5, "agent": {"agent": "command", "cost_usd": null, "input_tokens": 3234, "output_tokens": 317, "cache_read_tokens": 2400, "cache_write_tokens": null, "reasoning_tokens": null, "session_id": "fixture-v3", "session_started": 3, "resumed": false, "model": null, "turns": null, "is_error": null, "wall_s": 0.473, "exit": 0, "transcript_path": "logs/v3/proposer.out", "transcript_bytes": 532, "transcript_cut": false, "notes": ["reported in usage.json"], "tokens": 3551}}, "plan": {"ok": true, "hypothesis": "gain1: scripted hypothesis for v3", "target_class": null, "scope": "global", "flags": ["uncited"], "reason": "the plan names no config class, profiled kernel or metric from the context pack", "citations": []}, "forced_paths": [], "changed_files": ["kernel.json"], "diff_scan": {"findings": [], "reason": ""}, "bench_runs": {"eval": [{"side": "best", "round": 0, "wall_s": 0.06898505100070906, "timed_s": null}, {"side": "cand", "round": 0, "wall_s": 0.22204204899935576, "timed_s": null}, {"side": "cand", "round": 1, "wall_s": 0.07407410899941169, "timed_s": null}, {"side": "best", "round": 1, "wall_s": 0.07171109999944747, "timed_s": null}, {"side": "best", "round": 2, "wall_s": 0.07135594099963782, "timed_s": null}, {"side": "cand", "round": 2, "wall_s": 0.07239853400096763, "timed_s": null}, {"side": "cand", "round": 3, "wall_s": 0.07556445800037181, "timed_s": null}, {"side": "best", "round": 3, "wall_s": 0.07387621400084754, "timed_s": null}, {"side": "best", "round": 4, "wall_s": 0.07246623900027771, "timed_s": null}, {"side": "cand", "round": 4, "wall_s": 0.07127171600041038, "timed_s": null}, {"side": "cand", "round": 5, "wall_s": 0.07351932700112229, "timed_s": null}, {"side": "best", "round": 5, "wall_s": 0.07158432199867093, "timed_s": null}, {"side": "best", "round": 6, "wall_s": 0.07321219499863219, "timed_s": null}, {"side": "cand", "round": 6, "wall_s": 0.08017335199838271, "timed_s": null}, {"side": "cand", "round": 7, "wall_s": 0.07475133700063452, "timed_s": null}, {"side": "best", "round": 7, "wall_s": 0.07163894299992535, "timed_s": null}]}, "evaluated_tree": "ce6e00125dbe57e5cb1980477361140b73eb0b9f", "gpu": {"before": null, "after": null, "host": "local", "name": "no GPU (CPU-only target)"}, "gpu_seconds": {"eval": 1.3186248869988049}, "classes": {"cls=large": {"cls": "cls=large", "rounds": 8, "n": 8, "best": 157.97858429112995, "cand": 156.04671785338607, "ratio": 0.987771339726759, "lo": 0.9843639332259052, "hi": 0.9911905410716436, "verdict": "improved", "outliers": 0, "disturbed": 0, "unit": "sample", "plausible_lo": null, "plausible_hi": null, "delta_pct": -1.2228660273240988, "interval": [0.9843639332259052, 0.9911905410716436]}, "cls=small": {"cls": "cls=small", "rounds": 8, "n": 8, "best": 11.234433039541436, "cand": 11.132429959060405, "ratio": 0.9909204959322815, "lo": 0.987076197639644, "hi": 0.9947797663510812, "verdict": "undecided", "outliers": 0, "disturbed": 0, "unit": "sample", "plausible_lo": 0.9898145541908583, "plausible_hi": 0.9920276733669265, "delta_pct": -0.9079504067718513, "interval": [0.987076197639644, 0.9947797663510812]}}, "decision": {"verdict": "rejected", "reason": "no answer within 2 s: review_default is reject (cls=small \u22120.9% undecided after 8 rounds)", "rounds": 8, "gpu_seconds": 1.3186248869988049, "flags": ["undecided_at_max_rounds"], "focus": "cls=small", "classes": {"cls=large": {"cls": "cls=large", "rounds": 8, "n": 8, "best": 157.97858429112995, "cand": 156.04671785338607, "ratio": 0.987771339726759, "lo": 0.9843639332259052, "hi": 0.9911905410716436, "verdict": "improved", "outliers": 0, "disturbed": 0, "unit": "sample", "plausible_lo": null, "plausible_hi": null, "delta_pct": -1.2228660273240988, "interval": [0.9843639332259052, 0.9911905410716436]}, "cls=small": {"cls": "cls=small", "rounds": 8, "n": 8, "best": 11.234433039541436, "cand": 11.132429959060405, "ratio": 0.9909204959322815, "lo": 0.987076197639644, "hi": 0.9947797663510812, "verdict": "undecided", "outliers": 0, "disturbed": 0, "unit": "sample", "plausible_lo": 0.9898145541908583, "plausible_hi": 0.9920276733669265, "delta_pct": -0.9079504067718513, "interval": [0.987076197639644, 0.9947797663510812]}}, "by": "policy"}, "review": {"opened_at": 1795338008.6115656, "deadline": 1795338010.611562, "reason": "cls=small \u22120.9% undecided after 8 rounds"}}');
CREATE TABLE meta (
  key   TEXT PRIMARY KEY,
  value TEXT NOT NULL
);
INSERT INTO "meta" VALUES('schema_version','3');
INSERT INTO "meta" VALUES('tag','"fake-done"');
INSERT INTO "meta" VALUES('repo','"@REPO@"');
INSERT INTO "meta" VALUES('baseline_commit','"131e8a008a24a4b8d3f7c423f0be2e7210e2240a"');
INSERT INTO "meta" VALUES('created_at','1795338000.0');
INSERT INTO "meta" VALUES('state','"stopped"');
INSERT INTO "meta" VALUES('stop_reason','"--max-iters 3 reached in this session"');
INSERT INTO "meta" VALUES('config_source','"@REPO@/kopt.toml"');
INSERT INTO "meta" VALUES('frozen_config','"# frozen by `kopt init` from @REPO@/kopt.toml\n[target]\nbench = \"/work/wt-surfaces/.venv/bin/python bench.py\"\ncsv = \"-\"\nmetric = \"us\"\ndirection = \"min\"\ncorrect = \"err == 0\"\nclass_by = [\"cls\"]\nignore = []\nproduction = \"\"\nprotected = [\"bench.py\"]\nsources = []\nallow_untracked = []\ntimeout_s = 20.0\nmax_output_mib = 512.0\nab_command = \"\"\nab_serve = false\nenv = {  }\ncompile_flags = \"\"\nallow_constructs = []\nnetwork = false\nwritable = []\nreadable = []\nformat = \"csv\"\n\n[target.adapter]\ntable = \"\"\nunit = \"us\"\nstat = \"median\"\n\n[decide]\nconfidence = 0.99\nmin_effect_pct = 1.0\nmin_rounds = 3\nmax_rounds = 8\nbudget_gpu_s = 1800.0\nmax_other_regression_pct = 1.0\nsuspicious_speedup = 3.0\nreview_timeout_s = 2.0\nreview_default = \"reject\"\ntwo_in_a_row = false\nfutility_confidence = 0.8\nverify_after_format = true\nproduction_verdicts = false\nguard_max_regression_pct = 10.0\n\n[gpu]\nvendor = \"none\"\ndevices = []\nutil_max_pct = 10.0\nmem_used_max_mib = 2048.0\nmem_growth_max_mib = 64.0\nsamples = 3\nsample_interval_s = 1.0\nwait_s = 600.0\nwait_max_s = 3600.0\n\n[profile]\nkind = \"auto\"\nkernel = \"\"\ncommand = \"\"\ntimeout_s = 1800.0\nagree_margin_pct = 1.0\nrun_noise_pct = 0.3\nrepeats = 1\n\n[format]\ncommand = \"\"\ntimeout_s = 300.0\n\n[propose]\nkind = \"command\"\ncommand = \"/work/wt-surfaces/.venv/bin/python /work/wt-surfaces/tests/tui/fixture_agent.py\"\nagent = \"\"\nmodel = \"\"\nargs = []\nsession = \"fresh\"\ntimeout_s = 20.0\nrepair_attempts = 3\nbudget_usd = 0.0\nbudget_tokens = 0\nwritable = []\ntranscript_max_kib = 4096\nprompt_max_kib = 64\nnetwork = true\nreadable = [\"/tmp/kopt-fixture-rj7bxnan\"]\n\n[propose.tune]\nparams = \"\"\nspace = {  }\nper_class = false\nshared_first = false\norder = []\nseed = 0\nalike = {  }\n\n[stop]\nconsecutive_regressions = 5\nconsecutive_failures = 10\nmax_iters = 0\nmax_hours = 0.0\ntarget_pct_of_peak = 90.0\n\n[roofline]\nflops = \"\"\nbytes = \"\"\nspecs = \"\"\ngpu = \"\"\npeak_flops_metric = \"bf16_dense_tflops\"\nbandwidth_metric = \"hbm_bandwidth\"\nunit_scale = 1e-06\n"');
INSERT INTO "meta" VALUES('chain_sealed','true');
INSERT INTO "meta" VALUES('frozen_config_seal','"b5b885f10a28669a4228d828fe37296f95b54edc2f674ab82c4d902667b869ad"');
INSERT INTO "meta" VALUES('heartbeat','{"t": 1795338010.0820816, "pid": 28653}');
INSERT INTO "meta" VALUES('sandbox','{"confined": true, "summary": "sandboxed: bubblewrap 0.8.0 (as root)", "support": {"works": true, "bwrap": "/usr/bin/bwrap", "version": "bubblewrap 0.8.0", "user_namespaces": true, "privileged": true, "reason": "", "hint": ""}, "ever_unconfined": false}');
INSERT INTO "meta" VALUES('engine_pid','null');
INSERT INTO "meta" VALUES('engine_started_at','1795338000.0947993');
INSERT INTO "meta" VALUES('last_error','null');
INSERT INTO "meta" VALUES('progress','null');
INSERT INTO "meta" VALUES('gpu','{"chosen": null, "waited_s": 0.001975601999220089, "assessments": [], "t": 1795338008.3562074, "lane": 0, "host": "local"}');
INSERT INTO "meta" VALUES('live_log','"@ROOT@/fake-done/logs/v3/eval_r7_best.out"');
INSERT INTO "meta" VALUES('child_pgid','null');
INSERT INTO "meta" VALUES('decision_cost','{"mode": "process", "round_s": 0.14793466000264743, "start_s": 0.0, "noise_pct": 0.09567531509577941, "rounds_tie": 4, "rounds_change": 4, "max_rounds": 8, "seconds_tie": 0.5917386400105897, "seconds_change": 0.5917386400105897, "seconds_max": 1.1834772800211795, "undecided_tie": false, "slow": false, "text": "one decision takes about 0.6 s for a clear change (4 ABBA rounds of 2 runs) and 0.6 s (4 ABBA rounds of 2 runs) for no change; 0.1 s per run, run-to-run noise 0.096%"}');
INSERT INTO "meta" VALUES('config_columns','["shape", "cls", "n"]');
INSERT INTO "meta" VALUES('classes','["cls=large", "cls=small"]');
INSERT INTO "meta" VALUES('environment','{"captured_at": "2026-11-24T18:14:20+0000", "host": "vm", "platform": "Linux-6.18.44-fc-v657-x86_64-with-glibc2.36", "kopt_python": {"executable": "/work/wt-surfaces/.venv/bin/python", "version": "3.11.7"}, "bench_python": {"found_by": "`/work/wt-surfaces/.venv/bin/python` from the bench command", "executable": "/work/wt-surfaces/.venv/bin/python", "version": "3.11.7", "implementation": "CPython", "torch": "2.13.0+cpu", "triton": "3.9.0", "numpy": "2.4.6", "torch_cuda": null, "torch_hip": null, "torch_git": "cf30153c4c131c8164ee7798e5022d810682e2cb"}, "gpu_software": {"vendor": "none", "note": "[gpu].vendor = \"none\": CPU-only target"}, "compile_flags": "", "target_env": {}}');
INSERT INTO "meta" VALUES('live_classes','{"version": 3, "stage": "eval", "verdict": {"verdict": "borderline", "reason": "cls=small \u22120.9% undecided after 8 rounds", "rounds": 8, "gpu_seconds": 1.3186248869988049, "flags": ["undecided_at_max_rounds"], "focus": "cls=small", "classes": {"cls=large": {"cls": "cls=large", "rounds": 8, "n": 8, "best": 157.97858429112995, "cand": 156.04671785338607, "ratio": 0.987771339726759, "lo": 0.9843639332259052, "hi": 0.9911905410716436, "verdict": "improved", "outliers": 0, "disturbed": 0, "unit": "sample", "plausible_lo": null, "plausible_hi": null, "delta_pct": -1.2228660273240988, "interval": [0.9843639332259052, 0.9911905410716436]}, "cls=small": {"cls": "cls=small", "rounds": 8, "n": 8, "best": 11.234433039541436, "cand": 11.132429959060405, "ratio": 0.9909204959322815, "lo": 0.987076197639644, "hi": 0.9947797663510812, "verdict": "undecided", "outliers": 0, "disturbed": 0, "unit": "sample", "plausible_lo": 0.9898145541908583, "plausible_hi": 0.9920276733669265, "delta_pct": -0.9079504067718513, "interval": [0.987076197639644, 0.9947797663510812]}}}}');
INSERT INTO "meta" VALUES('active_s','10.554964760000075');
INSERT INTO "meta" VALUES('stop_time','1795338010.654421');
INSERT INTO "meta" VALUES('best_commit','"877d144b6518106b3c05b2bb55e93557773d63ba"');
CREATE TABLE samples (
  id      INTEGER PRIMARY KEY,
  version INTEGER NOT NULL,
  stage   TEXT NOT NULL,
  round   INTEGER NOT NULL,
  block   INTEGER NOT NULL DEFAULT 0,
  side    TEXT NOT NULL,
  config  TEXT NOT NULL,
  cls     TEXT NOT NULL,
  value   REAL NOT NULL,
  t       REAL NOT NULL,
  ord     TEXT NOT NULL DEFAULT '',
  flagged INTEGER NOT NULL DEFAULT 0,
  mean    REAL,
  last    REAL
);
INSERT INTO "samples" VALUES(1,0,'baseline',0,0,'best','shape=s0,cls=small,n=128','cls=small',9.96043,1.79533800043843030924e+09,'',0,NULL,NULL);
INSERT INTO "samples" VALUES(2,0,'baseline',0,0,'best','shape=s1,cls=small,n=256','cls=small',13.984023,1.79533800043843030924e+09,'',0,NULL,NULL);
INSERT INTO "samples" VALUES(3,0,'baseline',0,0,'best','shape=s2,cls=large,n=4096','cls=large',120.071322,1.79533800043843030924e+09,'',0,NULL,NULL);
INSERT INTO "samples" VALUES(4,0,'baseline',0,0,'best','shape=s3,cls=large,n=8192','cls=large',229.714171,1.79533800043843030924e+09,'',0,NULL,NULL);
INSERT INTO "samples" VALUES(5,0,'baseline',1,0,'best','shape=s0,cls=small,n=128','cls=small',9.991407,1.79533800055379080774e+09,'',0,NULL,NULL);
INSERT INTO "samples" VALUES(6,0,'baseline',1,0,'best','shape=s1,cls=small,n=256','cls=small',13.980592,1.79533800055379080774e+09,'',0,NULL,NULL);
INSERT INTO "samples" VALUES(7,0,'baseline',1,0,'best','shape=s2,cls=large,n=4096','cls=large',120.208358,1.79533800055379080774e+09,'',0,NULL,NULL);
INSERT INTO "samples" VALUES(8,0,'baseline',1,0,'best','shape=s3,cls=large,n=8192','cls=large',230.214485,1.79533800055379080774e+09,'',0,NULL,NULL);
INSERT INTO "samples" VALUES(9,0,'baseline',2,0,'best','shape=s0,cls=small,n=128','cls=small',9.960324,1.79533800067033386237e+09,'',0,NULL,NULL);
INSERT INTO "samples" VALUES(10,0,'baseline',2,0,'best','shape=s1,cls=small,n=256','cls=small',13.980997,1.79533800067033386237e+09,'',0,NULL,NULL);
INSERT INTO "samples" VALUES(11,0,'baseline',2,0,'best','shape=s2,cls=large,n=4096','cls=large',120.262484,1.79533800067033386237e+09,'',0,NULL,NULL);
INSERT INTO "samples" VALUES(12,0,'baseline',2,0,'best','shape=s3,cls=large,n=8192','cls=large',230.008617,1.79533800067033386237e+09,'',0,NULL,NULL);
INSERT INTO "samples" VALUES(13,1,'eval',0,0,'best','shape=s0,cls=small,n=128','cls=small',10.005404,1.79533800211060023304e+09,'AB',0,NULL,NULL);
INSERT INTO "samples" VALUES(14,1,'eval',0,0,'cand','shape=s0,cls=small,n=128','cls=small',9.48913,1.79533800211060023304e+09,'AB',0,NULL,NULL);
INSERT INTO "samples" VALUES(15,1,'eval',0,0,'best','shape=s1,cls=small,n=256','cls=small',14.021245,1.79533800211060023304e+09,'AB',0,NULL,NULL);
INSERT INTO "samples" VALUES(16,1,'eval',0,0,'cand','shape=s1,cls=small,n=256','cls=small',13.327235,1.79533800211060023304e+09,'AB',0,NULL,NULL);
INSERT INTO "samples" VALUES(17,1,'eval',0,0,'best','shape=s2,cls=large,n=4096','cls=large',120.628549,1.79533800211060023304e+09,'AB',0,NULL,NULL);
INSERT INTO "samples" VALUES(18,1,'eval',0,0,'cand','shape=s2,cls=large,n=4096','cls=large',113.890824,1.79533800211060023304e+09,'AB',0,NULL,NULL);
INSERT INTO "samples" VALUES(19,1,'eval',0,0,'best','shape=s3,cls=large,n=8192','cls=large',229.479958,1.79533800211060023304e+09,'AB',0,NULL,NULL);
INSERT INTO "samples" VALUES(20,1,'eval',0,0,'cand','shape=s3,cls=large,n=8192','cls=large',217.805788,1.79533800211060023304e+09,'AB',0,NULL,NULL);
INSERT INTO "samples" VALUES(21,1,'eval',1,0,'best','shape=s0,cls=small,n=128','cls=small',10.003763,1.79533800237492918968e+09,'BA',0,NULL,NULL);
INSERT INTO "samples" VALUES(22,1,'eval',1,0,'cand','shape=s0,cls=small,n=128','cls=small',9.497075,1.79533800237492918968e+09,'BA',0,NULL,NULL);
INSERT INTO "samples" VALUES(23,1,'eval',1,0,'best','shape=s1,cls=small,n=256','cls=small',13.994644,1.79533800237492918968e+09,'BA',0,NULL,NULL);
INSERT INTO "samples" VALUES(24,1,'eval',1,0,'cand','shape=s1,cls=small,n=256','cls=small',13.28164,1.79533800237492918968e+09,'BA',0,NULL,NULL);
INSERT INTO "samples" VALUES(25,1,'eval',1,0,'best','shape=s2,cls=large,n=4096','cls=large',119.839846,1.79533800237492918968e+09,'BA',0,NULL,NULL);
INSERT INTO "samples" VALUES(26,1,'eval',1,0,'cand','shape=s2,cls=large,n=4096','cls=large',114.057608,1.79533800237492918968e+09,'BA',0,NULL,NULL);
INSERT INTO "samples" VALUES(27,1,'eval',1,0,'best','shape=s3,cls=large,n=8192','cls=large',230.053957,1.79533800237492918968e+09,'BA',0,NULL,NULL);
INSERT INTO "samples" VALUES(28,1,'eval',1,0,'cand','shape=s3,cls=large,n=8192','cls=large',219.892045,1.79533800237492918968e+09,'BA',0,NULL,NULL);
INSERT INTO "samples" VALUES(29,1,'eval',2,0,'best','shape=s0,cls=small,n=128','cls=small',9.952949,1.79533800268316268925e+09,'AB',0,NULL,NULL);
INSERT INTO "samples" VALUES(30,1,'eval',2,0,'cand','shape=s0,cls=small,n=128','cls=small',9.477503,1.79533800268316268925e+09,'AB',0,NULL,NULL);
INSERT INTO "samples" VALUES(31,1,'eval',2,0,'best','shape=s1,cls=small,n=256','cls=small',14.023619,1.79533800268316268925e+09,'AB',0,NULL,NULL);
INSERT INTO "samples" VALUES(32,1,'eval',2,0,'cand','shape=s1,cls=small,n=256','cls=small',13.284679,1.79533800268316268925e+09,'AB',0,NULL,NULL);
INSERT INTO "samples" VALUES(33,1,'eval',2,0,'best','shape=s2,cls=large,n=4096','cls=large',119.776631,1.79533800268316268925e+09,'AB',0,NULL,NULL);
INSERT INTO "samples" VALUES(34,1,'eval',2,0,'cand','shape=s2,cls=large,n=4096','cls=large',113.888749,1.79533800268316268925e+09,'AB',0,NULL,NULL);
INSERT INTO "samples" VALUES(35,1,'eval',2,0,'best','shape=s3,cls=large,n=8192','cls=large',230.584881,1.79533800268316268925e+09,'AB',0,NULL,NULL);
INSERT INTO "samples" VALUES(36,1,'eval',2,0,'cand','shape=s3,cls=large,n=8192','cls=large',219.038368,1.79533800268316268925e+09,'AB',0,NULL,NULL);
INSERT INTO "samples" VALUES(37,1,'eval',3,0,'best','shape=s0,cls=small,n=128','cls=small',9.978686,1.79533800299160361288e+09,'BA',0,NULL,NULL);
INSERT INTO "samples" VALUES(38,1,'eval',3,0,'cand','shape=s0,cls=small,n=128','cls=small',9.499167,1.79533800299160361288e+09,'BA',0,NULL,NULL);
INSERT INTO "samples" VALUES(39,1,'eval',3,0,'best','shape=s1,cls=small,n=256','cls=small',13.941319,1.79533800299160361288e+09,'BA',0,NULL,NULL);
INSERT INTO "samples" VALUES(40,1,'eval',3,0,'cand','shape=s1,cls=small,n=256','cls=small',13.321777,1.79533800299160361288e+09,'BA',0,NULL,NULL);
INSERT INTO "samples" VALUES(41,1,'eval',3,0,'best','shape=s2,cls=large,n=4096','cls=large',119.88779,1.79533800299160361288e+09,'BA',0,NULL,NULL);
INSERT INTO "samples" VALUES(42,1,'eval',3,0,'cand','shape=s2,cls=large,n=4096','cls=large',113.890344,1.79533800299160361288e+09,'BA',0,NULL,NULL);
INSERT INTO "samples" VALUES(43,1,'eval',3,0,'best','shape=s3,cls=large,n=8192','cls=large',229.966791,1.79533800299160361288e+09,'BA',0,NULL,NULL);
INSERT INTO "samples" VALUES(44,1,'eval',3,0,'cand','shape=s3,cls=large,n=8192','cls=large',218.441388,1.79533800299160361288e+09,'BA',0,NULL,NULL);
INSERT INTO "samples" VALUES(45,1,'reverify',0,0,'best','shape=s0,cls=small,n=128','cls=small',9.986455,1.79533800326222252848e+09,'AB',0,NULL,NULL);
INSERT INTO "samples" VALUES(46,1,'reverify',0,0,'cand','shape=s0,cls=small,n=128','cls=small',9.501293,1.79533800326222252848e+09,'AB',0,NULL,NULL);
INSERT INTO "samples" VALUES(47,1,'reverify',0,0,'best','shape=s1,cls=small,n=256','cls=small',13.965444,1.79533800326222252848e+09,'AB',0,NULL,NULL);
INSERT INTO "samples" VALUES(48,1,'reverify',0,0,'cand','shape=s1,cls=small,n=256','cls=small',13.294601,1.79533800326222252848e+09,'AB',0,NULL,NULL);
INSERT INTO "samples" VALUES(49,1,'reverify',0,0,'best','shape=s2,cls=large,n=4096','cls=large',119.830773,1.79533800326222252848e+09,'AB',0,NULL,NULL);
INSERT INTO "samples" VALUES(50,1,'reverify',0,0,'cand','shape=s2,cls=large,n=4096','cls=large',114.357531,1.79533800326222252848e+09,'AB',0,NULL,NULL);
INSERT INTO "samples" VALUES(51,1,'reverify',0,0,'best','shape=s3,cls=large,n=8192','cls=large',229.280552,1.79533800326222252848e+09,'AB',0,NULL,NULL);
INSERT INTO "samples" VALUES(52,1,'reverify',0,0,'cand','shape=s3,cls=large,n=8192','cls=large',218.345398,1.79533800326222252848e+09,'AB',0,NULL,NULL);
INSERT INTO "samples" VALUES(53,1,'reverify',1,0,'best','shape=s0,cls=small,n=128','cls=small',10.005827,1.79533800351431202893e+09,'BA',0,NULL,NULL);
INSERT INTO "samples" VALUES(54,1,'reverify',1,0,'cand','shape=s0,cls=small,n=128','cls=small',9.49468,1.79533800351431202893e+09,'BA',0,NULL,NULL);
INSERT INTO "samples" VALUES(55,1,'reverify',1,0,'best','shape=s1,cls=small,n=256','cls=small',13.978707,1.79533800351431202893e+09,'BA',0,NULL,NULL);
INSERT INTO "samples" VALUES(56,1,'reverify',1,0,'cand','shape=s1,cls=small,n=256','cls=small',13.276906,1.79533800351431202893e+09,'BA',0,NULL,NULL);
INSERT INTO "samples" VALUES(57,1,'reverify',1,0,'best','shape=s2,cls=large,n=4096','cls=large',120.196555,1.79533800351431202893e+09,'BA',0,NULL,NULL);
INSERT INTO "samples" VALUES(58,1,'reverify',1,0,'cand','shape=s2,cls=large,n=4096','cls=large',113.626525,1.79533800351431202893e+09,'BA',0,NULL,NULL);
INSERT INTO "samples" VALUES(59,1,'reverify',1,0,'best','shape=s3,cls=large,n=8192','cls=large',229.792208,1.79533800351431202893e+09,'BA',0,NULL,NULL);
INSERT INTO "samples" VALUES(60,1,'reverify',1,0,'cand','shape=s3,cls=large,n=8192','cls=large',219.169916,1.79533800351431202893e+09,'BA',0,NULL,NULL);
INSERT INTO "samples" VALUES(61,1,'reverify',2,0,'best','shape=s0,cls=small,n=128','cls=small',10.00351,1.79533800376918625829e+09,'AB',0,NULL,NULL);
INSERT INTO "samples" VALUES(62,1,'reverify',2,0,'cand','shape=s0,cls=small,n=128','cls=small',9.506117,1.79533800376918625829e+09,'AB',0,NULL,NULL);
INSERT INTO "samples" VALUES(63,1,'reverify',2,0,'best','shape=s1,cls=small,n=256','cls=small',13.989386,1.79533800376918625829e+09,'AB',0,NULL,NULL);
INSERT INTO "samples" VALUES(64,1,'reverify',2,0,'cand','shape=s1,cls=small,n=256','cls=small',13.340276,1.79533800376918625829e+09,'AB',0,NULL,NULL);
INSERT INTO "samples" VALUES(65,1,'reverify',2,0,'best','shape=s2,cls=large,n=4096','cls=large',120.114816,1.79533800376918625829e+09,'AB',0,NULL,NULL);
INSERT INTO "samples" VALUES(66,1,'reverify',2,0,'cand','shape=s2,cls=large,n=4096','cls=large',113.932558,1.79533800376918625829e+09,'AB',0,NULL,NULL);
INSERT INTO "samples" VALUES(67,1,'reverify',2,0,'best','shape=s3,cls=large,n=8192','cls=large',229.721254,1.79533800376918625829e+09,'AB',0,NULL,NULL);
INSERT INTO "samples" VALUES(68,1,'reverify',2,0,'cand','shape=s3,cls=large,n=8192','cls=large',217.971463,1.79533800376918625829e+09,'AB',0,NULL,NULL);
INSERT INTO "samples" VALUES(69,1,'reverify',3,0,'best','shape=s0,cls=small,n=128','cls=small',9.993688,1.79533800401078724858e+09,'BA',0,NULL,NULL);
INSERT INTO "samples" VALUES(70,1,'reverify',3,0,'cand','shape=s0,cls=small,n=128','cls=small',9.520311,1.79533800401078724858e+09,'BA',0,NULL,NULL);
INSERT INTO "samples" VALUES(71,1,'reverify',3,0,'best','shape=s1,cls=small,n=256','cls=small',14.058712,1.79533800401078724858e+09,'BA',0,NULL,NULL);
INSERT INTO "samples" VALUES(72,1,'reverify',3,0,'cand','shape=s1,cls=small,n=256','cls=small',13.303037,1.79533800401078724858e+09,'BA',0,NULL,NULL);
INSERT INTO "samples" VALUES(73,1,'reverify',3,0,'best','shape=s2,cls=large,n=4096','cls=large',120.03811,1.79533800401078724858e+09,'BA',0,NULL,NULL);
INSERT INTO "samples" VALUES(74,1,'reverify',3,0,'cand','shape=s2,cls=large,n=4096','cls=large',113.729762,1.79533800401078724858e+09,'BA',0,NULL,NULL);
INSERT INTO "samples" VALUES(75,1,'reverify',3,0,'best','shape=s3,cls=large,n=8192','cls=large',230.275671,1.79533800401078724858e+09,'BA',0,NULL,NULL);
INSERT INTO "samples" VALUES(76,1,'reverify',3,0,'cand','shape=s3,cls=large,n=8192','cls=large',219.101303,1.79533800401078724858e+09,'BA',0,NULL,NULL);
INSERT INTO "samples" VALUES(77,2,'eval',0,0,'best','shape=s0,cls=small,n=128','cls=small',9.484565,1.79533800521282696721e+09,'AB',0,NULL,NULL);
INSERT INTO "samples" VALUES(78,2,'eval',0,0,'cand','shape=s0,cls=small,n=128','cls=small',9.976049,1.79533800521282696721e+09,'AB',0,NULL,NULL);
INSERT INTO "samples" VALUES(79,2,'eval',0,0,'best','shape=s1,cls=small,n=256','cls=small',13.237623,1.79533800521282696721e+09,'AB',0,NULL,NULL);
INSERT INTO "samples" VALUES(80,2,'eval',0,0,'cand','shape=s1,cls=small,n=256','cls=small',13.909356,1.79533800521282696721e+09,'AB',0,NULL,NULL);
INSERT INTO "samples" VALUES(81,2,'eval',0,0,'best','shape=s2,cls=large,n=4096','cls=large',113.981856,1.79533800521282696721e+09,'AB',0,NULL,NULL);
INSERT INTO "samples" VALUES(82,2,'eval',0,0,'cand','shape=s2,cls=large,n=4096','cls=large',119.274937,1.79533800521282696721e+09,'AB',0,NULL,NULL);
INSERT INTO "samples" VALUES(83,2,'eval',0,0,'best','shape=s3,cls=large,n=8192','cls=large',218.573442,1.79533800521282696721e+09,'AB',0,NULL,NULL);
INSERT INTO "samples" VALUES(84,2,'eval',0,0,'cand','shape=s3,cls=large,n=8192','cls=large',228.69256,1.79533800521282696721e+09,'AB',0,NULL,NULL);
INSERT INTO "samples" VALUES(85,2,'eval',1,0,'best','shape=s0,cls=small,n=128','cls=small',9.470039,1.79533800545901823042e+09,'BA',0,NULL,NULL);
INSERT INTO "samples" VALUES(86,2,'eval',1,0,'cand','shape=s0,cls=small,n=128','cls=small',9.98178,1.79533800545901823042e+09,'BA',0,NULL,NULL);
INSERT INTO "samples" VALUES(87,2,'eval',1,0,'best','shape=s1,cls=small,n=256','cls=small',13.260422,1.79533800545901823042e+09,'BA',0,NULL,NULL);
INSERT INTO "samples" VALUES(88,2,'eval',1,0,'cand','shape=s1,cls=small,n=256','cls=small',13.937078,1.79533800545901823042e+09,'BA',0,NULL,NULL);
INSERT INTO "samples" VALUES(89,2,'eval',1,0,'best','shape=s2,cls=large,n=4096','cls=large',113.930628,1.79533800545901823042e+09,'BA',0,NULL,NULL);
INSERT INTO "samples" VALUES(90,2,'eval',1,0,'cand','shape=s2,cls=large,n=4096','cls=large',119.796635,1.79533800545901823042e+09,'BA',0,NULL,NULL);
INSERT INTO "samples" VALUES(91,2,'eval',1,0,'best','shape=s3,cls=large,n=8192','cls=large',218.740462,1.79533800545901823042e+09,'BA',0,NULL,NULL);
INSERT INTO "samples" VALUES(92,2,'eval',1,0,'cand','shape=s3,cls=large,n=8192','cls=large',229.240915,1.79533800545901823042e+09,'BA',0,NULL,NULL);
INSERT INTO "samples" VALUES(93,2,'eval',2,0,'best','shape=s0,cls=small,n=128','cls=small',9.509726,1.79533800570571589472e+09,'AB',0,NULL,NULL);
INSERT INTO "samples" VALUES(94,2,'eval',2,0,'cand','shape=s0,cls=small,n=128','cls=small',9.999236,1.79533800570571589472e+09,'AB',0,NULL,NULL);
INSERT INTO "samples" VALUES(95,2,'eval',2,0,'best','shape=s1,cls=small,n=256','cls=small',13.316594,1.79533800570571589472e+09,'AB',0,NULL,NULL);
INSERT INTO "samples" VALUES(96,2,'eval',2,0,'cand','shape=s1,cls=small,n=256','cls=small',13.966625,1.79533800570571589472e+09,'AB',0,NULL,NULL);
INSERT INTO "samples" VALUES(97,2,'eval',2,0,'best','shape=s2,cls=large,n=4096','cls=large',113.817075,1.79533800570571589472e+09,'AB',0,NULL,NULL);
INSERT INTO "samples" VALUES(98,2,'eval',2,0,'cand','shape=s2,cls=large,n=4096','cls=large',119.726002,1.79533800570571589472e+09,'AB',0,NULL,NULL);
INSERT INTO "samples" VALUES(99,2,'eval',2,0,'best','shape=s3,cls=large,n=8192','cls=large',219.015155,1.79533800570571589472e+09,'AB',0,NULL,NULL);
INSERT INTO "samples" VALUES(100,2,'eval',2,0,'cand','shape=s3,cls=large,n=8192','cls=large',229.594899,1.79533800570571589472e+09,'AB',0,NULL,NULL);
INSERT INTO "samples" VALUES(101,3,'eval',0,0,'best','shape=s0,cls=small,n=128','cls=small',9.494509,1.79533800681002521509e+09,'AB',0,NULL,NULL);
INSERT INTO "samples" VALUES(102,3,'eval',0,0,'cand','shape=s0,cls=small,n=128','cls=small',9.40168,1.79533800681002521509e+09,'AB',0,NULL,NULL);
INSERT INTO "samples" VALUES(103,3,'eval',0,0,'best','shape=s1,cls=small,n=256','cls=small',13.329144,1.79533800681002521509e+09,'AB',0,NULL,NULL);
INSERT INTO "samples" VALUES(104,3,'eval',0,0,'cand','shape=s1,cls=small,n=256','cls=small',13.164774,1.79533800681002521509e+09,'AB',0,NULL,NULL);
INSERT INTO "samples" VALUES(105,3,'eval',0,0,'best','shape=s2,cls=large,n=4096','cls=large',114.379615,1.79533800681002521509e+09,'AB',0,NULL,NULL);
INSERT INTO "samples" VALUES(106,3,'eval',0,0,'cand','shape=s2,cls=large,n=4096','cls=large',112.140142,1.79533800681002521509e+09,'AB',0,NULL,NULL);
INSERT INTO "samples" VALUES(107,3,'eval',0,0,'best','shape=s3,cls=large,n=8192','cls=large',218.737055,1.79533800681002521509e+09,'AB',0,NULL,NULL);
INSERT INTO "samples" VALUES(108,3,'eval',0,0,'cand','shape=s3,cls=large,n=8192','cls=large',216.012028,1.79533800681002521509e+09,'AB',0,NULL,NULL);
INSERT INTO "samples" VALUES(109,3,'eval',1,0,'best','shape=s0,cls=small,n=128','cls=small',9.478178,1.79533800707690858839e+09,'BA',0,NULL,NULL);
INSERT INTO "samples" VALUES(110,3,'eval',1,0,'cand','shape=s0,cls=small,n=128','cls=small',9.398,1.79533800707690858839e+09,'BA',0,NULL,NULL);
INSERT INTO "samples" VALUES(111,3,'eval',1,0,'best','shape=s1,cls=small,n=256','cls=small',13.317299,1.79533800707690858839e+09,'BA',0,NULL,NULL);
INSERT INTO "samples" VALUES(112,3,'eval',1,0,'cand','shape=s1,cls=small,n=256','cls=small',13.147629,1.79533800707690858839e+09,'BA',0,NULL,NULL);
INSERT INTO "samples" VALUES(113,3,'eval',1,0,'best','shape=s2,cls=large,n=4096','cls=large',113.899379,1.79533800707690858839e+09,'BA',0,NULL,NULL);
INSERT INTO "samples" VALUES(114,3,'eval',1,0,'cand','shape=s2,cls=large,n=4096','cls=large',112.577913,1.79533800707690858839e+09,'BA',0,NULL,NULL);
INSERT INTO "samples" VALUES(115,3,'eval',1,0,'best','shape=s3,cls=large,n=8192','cls=large',218.586193,1.79533800707690858839e+09,'BA',0,NULL,NULL);
INSERT INTO "samples" VALUES(116,3,'eval',1,0,'cand','shape=s3,cls=large,n=8192','cls=large',216.07141,1.79533800707690858839e+09,'BA',0,NULL,NULL);
INSERT INTO "samples" VALUES(117,3,'eval',2,0,'best','shape=s0,cls=small,n=128','cls=small',9.470512,1.79533800733642792701e+09,'AB',0,NULL,NULL);
INSERT INTO "samples" VALUES(118,3,'eval',2,0,'cand','shape=s0,cls=small,n=128','cls=small',9.35231,1.79533800733642792701e+09,'AB',0,NULL,NULL);
INSERT INTO "samples" VALUES(119,3,'eval',2,0,'best','shape=s1,cls=small,n=256','cls=small',13.257524,1.79533800733642792701e+09,'AB',0,NULL,NULL);
INSERT INTO "samples" VALUES(120,3,'eval',2,0,'cand','shape=s1,cls=small,n=256','cls=small',13.172031,1.79533800733642792701e+09,'AB',0,NULL,NULL);
INSERT INTO "samples" VALUES(121,3,'eval',2,0,'best','shape=s2,cls=large,n=4096','cls=large',113.903415,1.79533800733642792701e+09,'AB',0,NULL,NULL);
INSERT INTO "samples" VALUES(122,3,'eval',2,0,'cand','shape=s2,cls=large,n=4096','cls=large',112.741093,1.79533800733642792701e+09,'AB',0,NULL,NULL);
INSERT INTO "samples" VALUES(123,3,'eval',2,0,'best','shape=s3,cls=large,n=8192','cls=large',218.239439,1.79533800733642792701e+09,'AB',0,NULL,NULL);
INSERT INTO "samples" VALUES(124,3,'eval',2,0,'cand','shape=s3,cls=large,n=8192','cls=large',215.476941,1.79533800733642792701e+09,'AB',0,NULL,NULL);
INSERT INTO "samples" VALUES(125,3,'eval',3,0,'best','shape=s0,cls=small,n=128','cls=small',9.486386,1.795338007606316328e+09,'BA',0,NULL,NULL);
INSERT INTO "samples" VALUES(126,3,'eval',3,0,'cand','shape=s0,cls=small,n=128','cls=small',9.431466,1.795338007606316328e+09,'BA',0,NULL,NULL);
INSERT INTO "samples" VALUES(127,3,'eval',3,0,'best','shape=s1,cls=small,n=256','cls=small',13.301938,1.795338007606316328e+09,'BA',0,NULL,NULL);
INSERT INTO "samples" VALUES(128,3,'eval',3,0,'cand','shape=s1,cls=small,n=256','cls=small',13.26709,1.795338007606316328e+09,'BA',0,NULL,NULL);
INSERT INTO "samples" VALUES(129,3,'eval',3,0,'best','shape=s2,cls=large,n=4096','cls=large',114.271305,1.795338007606316328e+09,'BA',0,NULL,NULL);
INSERT INTO "samples" VALUES(130,3,'eval',3,0,'cand','shape=s2,cls=large,n=4096','cls=large',112.910141,1.795338007606316328e+09,'BA',0,NULL,NULL);
INSERT INTO "samples" VALUES(131,3,'eval',3,0,'best','shape=s3,cls=large,n=8192','cls=large',218.592357,1.795338007606316328e+09,'BA',0,NULL,NULL);
INSERT INTO "samples" VALUES(132,3,'eval',3,0,'cand','shape=s3,cls=large,n=8192','cls=large',215.548815,1.795338007606316328e+09,'BA',0,NULL,NULL);
INSERT INTO "samples" VALUES(133,3,'eval',4,0,'best','shape=s0,cls=small,n=128','cls=small',9.50867,1.79533800786690640443e+09,'AB',0,NULL,NULL);
INSERT INTO "samples" VALUES(134,3,'eval',4,0,'cand','shape=s0,cls=small,n=128','cls=small',9.399791,1.79533800786690640443e+09,'AB',0,NULL,NULL);
INSERT INTO "samples" VALUES(135,3,'eval',4,0,'best','shape=s1,cls=small,n=256','cls=small',13.319812,1.79533800786690640443e+09,'AB',0,NULL,NULL);
INSERT INTO "samples" VALUES(136,3,'eval',4,0,'cand','shape=s1,cls=small,n=256','cls=small',13.187634,1.79533800786690640443e+09,'AB',0,NULL,NULL);
INSERT INTO "samples" VALUES(137,3,'eval',4,0,'best','shape=s2,cls=large,n=4096','cls=large',114.34067,1.79533800786690640443e+09,'AB',0,NULL,NULL);
INSERT INTO "samples" VALUES(138,3,'eval',4,0,'cand','shape=s2,cls=large,n=4096','cls=large',112.758652,1.79533800786690640443e+09,'AB',0,NULL,NULL);
INSERT INTO "samples" VALUES(139,3,'eval',4,0,'best','shape=s3,cls=large,n=8192','cls=large',218.451649,1.79533800786690640443e+09,'AB',0,NULL,NULL);
INSERT INTO "samples" VALUES(140,3,'eval',4,0,'cand','shape=s3,cls=large,n=8192','cls=large',216.800546,1.79533800786690640443e+09,'AB',0,NULL,NULL);
INSERT INTO "samples" VALUES(141,3,'eval',5,0,'best','shape=s0,cls=small,n=128','cls=small',9.502362,1.79533800810687780378e+09,'BA',0,NULL,NULL);
INSERT INTO "samples" VALUES(142,3,'eval',5,0,'cand','shape=s0,cls=small,n=128','cls=small',9.404253,1.79533800810687780378e+09,'BA',0,NULL,NULL);
INSERT INTO "samples" VALUES(143,3,'eval',5,0,'best','shape=s1,cls=small,n=256','cls=small',13.287171,1.79533800810687780378e+09,'BA',0,NULL,NULL);
INSERT INTO "samples" VALUES(144,3,'eval',5,0,'cand','shape=s1,cls=small,n=256','cls=small',13.163884,1.79533800810687780378e+09,'BA',0,NULL,NULL);
INSERT INTO "samples" VALUES(145,3,'eval',5,0,'best','shape=s2,cls=large,n=4096','cls=large',114.306618,1.79533800810687780378e+09,'BA',0,NULL,NULL);
INSERT INTO "samples" VALUES(146,3,'eval',5,0,'cand','shape=s2,cls=large,n=4096','cls=large',112.824694,1.79533800810687780378e+09,'BA',0,NULL,NULL);
INSERT INTO "samples" VALUES(147,3,'eval',5,0,'best','shape=s3,cls=large,n=8192','cls=large',218.962027,1.79533800810687780378e+09,'BA',0,NULL,NULL);
INSERT INTO "samples" VALUES(148,3,'eval',5,0,'cand','shape=s3,cls=large,n=8192','cls=large',216.033317,1.79533800810687780378e+09,'BA',0,NULL,NULL);
INSERT INTO "samples" VALUES(149,3,'eval',6,0,'best','shape=s0,cls=small,n=128','cls=small',9.482622,1.79533800835053849219e+09,'AB',0,NULL,NULL);
INSERT INTO "samples" VALUES(150,3,'eval',6,0,'cand','shape=s0,cls=small,n=128','cls=small',9.394532,1.79533800835053849219e+09,'AB',0,NULL,NULL);
INSERT INTO "samples" VALUES(151,3,'eval',6,0,'best','shape=s1,cls=small,n=256','cls=small',13.287581,1.79533800835053849219e+09,'AB',0,NULL,NULL);
INSERT INTO "samples" VALUES(152,3,'eval',6,0,'cand','shape=s1,cls=small,n=256','cls=small',13.185531,1.79533800835053849219e+09,'AB',0,NULL,NULL);
INSERT INTO "samples" VALUES(153,3,'eval',6,0,'best','shape=s2,cls=large,n=4096','cls=large',113.914426,1.79533800835053849219e+09,'AB',0,NULL,NULL);
INSERT INTO "samples" VALUES(154,3,'eval',6,0,'cand','shape=s2,cls=large,n=4096','cls=large',112.755146,1.79533800835053849219e+09,'AB',0,NULL,NULL);
INSERT INTO "samples" VALUES(155,3,'eval',6,0,'best','shape=s3,cls=large,n=8192','cls=large',219.225911,1.79533800835053849219e+09,'AB',0,NULL,NULL);
INSERT INTO "samples" VALUES(156,3,'eval',6,0,'cand','shape=s3,cls=large,n=8192','cls=large',216.483609,1.79533800835053849219e+09,'AB',0,NULL,NULL);
INSERT INTO "samples" VALUES(157,3,'eval',7,0,'best','shape=s0,cls=small,n=128','cls=small',9.508859,1.79533800860061931604e+09,'BA',0,NULL,NULL);
INSERT INTO "samples" VALUES(158,3,'eval',7,0,'cand','shape=s0,cls=small,n=128','cls=small',9.41485,1.79533800860061931604e+09,'BA',0,NULL,NULL);
INSERT INTO "samples" VALUES(159,3,'eval',7,0,'best','shape=s1,cls=small,n=256','cls=small',13.279033,1.79533800860061931604e+09,'BA',0,NULL,NULL);
INSERT INTO "samples" VALUES(160,3,'eval',7,0,'cand','shape=s1,cls=small,n=256','cls=small',13.189601,1.79533800860061931604e+09,'BA',0,NULL,NULL);
INSERT INTO "samples" VALUES(161,3,'eval',7,0,'best','shape=s2,cls=large,n=4096','cls=large',114.265666,1.79533800860061931604e+09,'BA',0,NULL,NULL);
INSERT INTO "samples" VALUES(162,3,'eval',7,0,'cand','shape=s2,cls=large,n=4096','cls=large',112.418424,1.79533800860061931604e+09,'BA',0,NULL,NULL);
INSERT INTO "samples" VALUES(163,3,'eval',7,0,'best','shape=s3,cls=large,n=8192','cls=large',218.138168,1.79533800860061931604e+09,'BA',0,NULL,NULL);
INSERT INTO "samples" VALUES(164,3,'eval',7,0,'cand','shape=s3,cls=large,n=8192','cls=large',217.014634,1.79533800860061931604e+09,'BA',0,NULL,NULL);
CREATE INDEX samples_by_version ON samples (version, stage);
CREATE INDEX commands_pending ON commands (status, id);
COMMIT;
