BEGIN TRANSACTION;
CREATE TABLE commands (
  id         INTEGER PRIMARY KEY,
  t          REAL NOT NULL,
  kind       TEXT NOT NULL,
  args       TEXT NOT NULL DEFAULT '{}',
  source     TEXT NOT NULL DEFAULT '',
  status     TEXT NOT NULL DEFAULT 'pending',
  handled_at REAL,
  result     TEXT NOT NULL DEFAULT ''
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
INSERT INTO "events" VALUES(1,1.7953380000040128231e+09,NULL,'info','init','created from @REPO@ at 472bd1111caf',NULL);
INSERT INTO "events" VALUES(2,1.79533800016591763492e+09,NULL,'info','engine','engine started (pid 23481, proposer command)',NULL);
INSERT INTO "events" VALUES(3,1.7953380003322310448e+09,0,'info','baseline','measuring the unmodified baseline',NULL);
INSERT INTO "events" VALUES(4,1.79533800112426424021e+09,0,'info','verdict','v0: baseline: baseline over 4 configs in 2 classes',NULL);
INSERT INTO "events" VALUES(5,1.79533800120000648498e+09,1,'info','iteration','v1 started from 472bd1111c',NULL);
INSERT INTO "events" VALUES(6,1.79533800138796377186e+09,1,'info','plan','v1: gain5: scripted hypothesis for v1 [global]',NULL);
INSERT INTO "events" VALUES(7,1.79533800262816619873e+09,1,'info','decision','v1 eval: keep: cls=large −5.2% faster (every class improved) (3 rounds, 0.9 GPU-s)',NULL);
INSERT INTO "events" VALUES(8,1.79533800272789144511e+09,1,'info','verdict','v1: keep: cls=large −5.2% faster (every class improved)',NULL);
INSERT INTO "events" VALUES(9,1.7953380028080396652e+09,2,'info','iteration','v2 started from 3c720e8791',NULL);
INSERT INTO "events" VALUES(10,1.79533800304032826423e+09,2,'info','plan','v2: loss5: scripted hypothesis for v2 [global]',NULL);
INSERT INTO "events" VALUES(11,1.79533800477821779252e+09,2,'info','decision','v2 eval: regression: cls=small +5.0% slower (4 rounds, 1.3 GPU-s)',NULL);
INSERT INTO "events" VALUES(12,1.79533800479274725913e+09,2,'warn','verdict','v2: regression: cls=small +5.0% slower',NULL);
INSERT INTO "events" VALUES(13,1.79533800490976428983e+09,3,'info','iteration','v3 started from 3c720e8791',NULL);
INSERT INTO "events" VALUES(14,1795338005.12398,3,'info','plan','v3: gain1: scripted hypothesis for v3 [global]',NULL);
INSERT INTO "events" VALUES(15,1.79533800704006052013e+09,3,'info','decision','v3 eval: keep: cls=large −1.1% faster (every class improved) (4 rounds, 1.4 GPU-s)',NULL);
INSERT INTO "events" VALUES(16,1.79533800720007014279e+09,3,'info','verdict','v3: keep: cls=large −1.1% faster (every class improved)',NULL);
INSERT INTO "events" VALUES(17,1.7953380072440149784e+09,NULL,'info','stop','run stopped: --max-iters 3 reached in this session',NULL);
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
INSERT INTO "iterations" VALUES(0,'baseline','done',0,NULL,'baseline (unmodified)',NULL,'global','472bd1111caf18b5f2afa3de33f1f1743964b83e','472bd1111caf18b5f2afa3de33f1f1743964b83e',0,1.79533800024739956854e+09,1.79533800111650872232e+09,'{"timings": {"gate_wait_s": 0.0125, "total_s": 0.8691, "engine_s": 0.8566}, "gpu": {"before": null, "after": null, "host": "local", "name": "no GPU (CPU-only target)"}, "classes": {"cls=large": {"best": 166.02535249270528, "configs": 2}, "cls=small": {"best": 11.829929389699908, "configs": 2}}, "configs": {"shape=s0,cls=small,n=128": {"cls": "cls=small", "production": true, "row": {"shape": "s0", "cls": "small", "n": 128}}, "shape=s1,cls=small,n=256": {"cls": "cls=small", "production": true, "row": {"shape": "s1", "cls": "small", "n": 256}}, "shape=s2,cls=large,n=4096": {"cls": "cls=large", "production": true, "row": {"shape": "s2", "cls": "large", "n": 4096}}, "shape=s3,cls=large,n=8192": {"cls": "cls=large", "production": true, "row": {"shape": "s3", "cls": "large", "n": 8192}}}, "config_columns": ["shape", "cls", "n"], "decision": {"verdict": "baseline", "reason": "baseline over 4 configs in 2 classes", "by": "engine"}}');
INSERT INTO "iterations" VALUES(1,'keep','done',0,0,'gain5: scripted hypothesis for v1',NULL,'global','3c720e8791158de1d2286e61fccbc026df56682b','472bd1111caf18b5f2afa3de33f1f1743964b83e',0,1.7953380011971595288e+09,1.79533800272011160852e+09,'{"lane": 0, "timings": {"gate_wait_s": 0.014, "proposer_s": 0.1435, "police_s": 0.124, "looks_s": [0.3686, 0.3727, 0.293], "commit_s": 0.0877, "total_s": 1.523, "engine_s": 0.3312}, "proposal": {"command": "/work/wt-tui/.venv/bin/python /work/wt-tui/tests/fake_target/proposer.py", "exit": 0, "seconds": 0.1}, "changed_files": ["kernel.json"], "evaluated_tree": "90830bf7d9959ad2cbd195116289afc3898631c8", "gpu": {"before": null, "after": null, "host": "local", "name": "no GPU (CPU-only target)"}, "gpu_seconds": {"eval": 0.9082014730001902}, "classes": {"cls=large": {"cls": "cls=large", "rounds": 3, "n": 3, "best": 166.34153891794432, "cand": 157.7236640396613, "ratio": 0.9481467685582827, "lo": 0.9357370868319435, "hi": 0.9607210266412889, "verdict": "improved", "outliers": 0, "disturbed": 0, "unit": "sample", "plausible_lo": null, "plausible_hi": null, "delta_pct": -5.185323144171727, "interval": [0.9357370868319435, 0.9607210266412889]}, "cls=small": {"cls": "cls=small", "rounds": 3, "n": 3, "best": 11.828498664433578, "cand": 11.250203185917576, "ratio": 0.9513934743765348, "lo": 0.9292318264228119, "hi": 0.9740836649673683, "verdict": "improved", "outliers": 0, "disturbed": 0, "unit": "sample", "plausible_lo": null, "plausible_hi": null, "delta_pct": -4.860652562346523, "interval": [0.9292318264228119, 0.9740836649673683]}}, "decision": {"verdict": "keep", "reason": "cls=large \u22125.2% faster (every class improved)", "rounds": 3, "gpu_seconds": 0.9082014730001902, "flags": [], "focus": "cls=large", "classes": {"cls=large": {"cls": "cls=large", "rounds": 3, "n": 3, "best": 166.34153891794432, "cand": 157.7236640396613, "ratio": 0.9481467685582827, "lo": 0.9357370868319435, "hi": 0.9607210266412889, "verdict": "improved", "outliers": 0, "disturbed": 0, "unit": "sample", "plausible_lo": null, "plausible_hi": null, "delta_pct": -5.185323144171727, "interval": [0.9357370868319435, 0.9607210266412889]}, "cls=small": {"cls": "cls=small", "rounds": 3, "n": 3, "best": 11.828498664433578, "cand": 11.250203185917576, "ratio": 0.9513934743765348, "lo": 0.9292318264228119, "hi": 0.9740836649673683, "verdict": "improved", "outliers": 0, "disturbed": 0, "unit": "sample", "plausible_lo": null, "plausible_hi": null, "delta_pct": -4.860652562346523, "interval": [0.9292318264228119, 0.9740836649673683]}}, "by": "engine"}, "commit_tree": "90830bf7d9959ad2cbd195116289afc3898631c8", "keep_status": "keep"}');
INSERT INTO "iterations" VALUES(2,'regression','done',0,1,'loss5: scripted hypothesis for v2',NULL,'global',NULL,'3c720e8791158de1d2286e61fccbc026df56682b',0,1.79533800280270147316e+09,1.79533800479200983044e+09,'{"lane": 0, "timings": {"gate_wait_s": 0.0229, "proposer_s": 0.1783, "police_s": 0.1389, "looks_s": [0.3884, 0.4051, 0.303, 0.3655], "total_s": 1.9893, "engine_s": 0.3261}, "proposal": {"command": "/work/wt-tui/.venv/bin/python /work/wt-tui/tests/fake_target/proposer.py", "exit": 0, "seconds": 0.2}, "changed_files": ["kernel.json"], "evaluated_tree": "078eb6ed14ebab66c24ef95fab137224546e233f", "gpu": {"before": null, "after": null, "host": "local", "name": "no GPU (CPU-only target)"}, "gpu_seconds": {"eval": 1.277558622000015}, "classes": {"cls=large": {"cls": "cls=large", "rounds": 4, "n": 4, "best": 157.8376430477134, "cand": 165.71079785589853, "ratio": 1.0498813505838105, "lo": 1.0316640878909809, "hi": 1.0684202961421339, "verdict": "regressed", "outliers": 0, "disturbed": 0, "unit": "sample", "plausible_lo": null, "plausible_hi": null, "delta_pct": 4.988135058381049, "interval": [1.0316640878909809, 1.0684202961421339]}, "cls=small": {"cls": "cls=small", "rounds": 4, "n": 4, "best": 11.240452366094434, "cand": 11.807390934611213, "ratio": 1.0504373445171027, "lo": 1.0326283058985049, "hi": 1.0685535235217494, "verdict": "regressed", "outliers": 0, "disturbed": 0, "unit": "sample", "plausible_lo": null, "plausible_hi": null, "delta_pct": 5.043734451710269, "interval": [1.0326283058985049, 1.0685535235217494]}}, "decision": {"verdict": "regression", "reason": "cls=small +5.0% slower", "rounds": 4, "gpu_seconds": 1.277558622000015, "flags": [], "focus": "cls=small", "classes": {"cls=large": {"cls": "cls=large", "rounds": 4, "n": 4, "best": 157.8376430477134, "cand": 165.71079785589853, "ratio": 1.0498813505838105, "lo": 1.0316640878909809, "hi": 1.0684202961421339, "verdict": "regressed", "outliers": 0, "disturbed": 0, "unit": "sample", "plausible_lo": null, "plausible_hi": null, "delta_pct": 4.988135058381049, "interval": [1.0316640878909809, 1.0684202961421339]}, "cls=small": {"cls": "cls=small", "rounds": 4, "n": 4, "best": 11.240452366094434, "cand": 11.807390934611213, "ratio": 1.0504373445171027, "lo": 1.0326283058985049, "hi": 1.0685535235217494, "verdict": "regressed", "outliers": 0, "disturbed": 0, "unit": "sample", "plausible_lo": null, "plausible_hi": null, "delta_pct": 5.043734451710269, "interval": [1.0326283058985049, 1.0685535235217494]}}, "by": "engine"}}');
INSERT INTO "iterations" VALUES(3,'keep','done',0,1,'gain1: scripted hypothesis for v3',NULL,'global','c3f594a551bd38566a84a82b66630a93e6f906cd','3c720e8791158de1d2286e61fccbc026df56682b',0,1.79533800490845346447e+09,1.79533800718818426127e+09,'{"lane": 0, "timings": {"gate_wait_s": 0.0305, "proposer_s": 0.1892, "police_s": 0.076, "looks_s": [0.3744, 0.4185, 0.332, 0.5219], "commit_s": 0.14, "total_s": 2.2797, "engine_s": 0.4132}, "proposal": {"command": "/work/wt-tui/.venv/bin/python /work/wt-tui/tests/fake_target/proposer.py", "exit": 0, "seconds": 0.2}, "changed_files": ["kernel.json"], "evaluated_tree": "59025136895903b510ca660b70f192b7c12105ff", "gpu": {"before": null, "after": null, "host": "local", "name": "no GPU (CPU-only target)"}, "gpu_seconds": {"eval": 1.446098513000834}, "classes": {"cls=large": {"cls": "cls=large", "rounds": 4, "n": 4, "best": 157.89756185594172, "cand": 156.17852976863801, "ratio": 0.9891129915680891, "lo": 0.9793473990782743, "hi": 0.998975961961564, "verdict": "improved", "outliers": 0, "disturbed": 0, "unit": "sample", "plausible_lo": null, "plausible_hi": null, "delta_pct": -1.0887008431910927, "interval": [0.9793473990782743, 0.998975961961564]}, "cls=small": {"cls": "cls=small", "rounds": 4, "n": 4, "best": 11.252608965419391, "cand": 11.131767178524349, "ratio": 0.9892609982923599, "lo": 0.9797500340535813, "hi": 0.9988642906123912, "verdict": "improved", "outliers": 0, "disturbed": 0, "unit": "sample", "plausible_lo": null, "plausible_hi": null, "delta_pct": -1.0739001707640083, "interval": [0.9797500340535813, 0.9988642906123912]}}, "decision": {"verdict": "keep", "reason": "cls=large \u22121.1% faster (every class improved)", "rounds": 4, "gpu_seconds": 1.446098513000834, "flags": [], "focus": "cls=large", "classes": {"cls=large": {"cls": "cls=large", "rounds": 4, "n": 4, "best": 157.89756185594172, "cand": 156.17852976863801, "ratio": 0.9891129915680891, "lo": 0.9793473990782743, "hi": 0.998975961961564, "verdict": "improved", "outliers": 0, "disturbed": 0, "unit": "sample", "plausible_lo": null, "plausible_hi": null, "delta_pct": -1.0887008431910927, "interval": [0.9793473990782743, 0.998975961961564]}, "cls=small": {"cls": "cls=small", "rounds": 4, "n": 4, "best": 11.252608965419391, "cand": 11.131767178524349, "ratio": 0.9892609982923599, "lo": 0.9797500340535813, "hi": 0.9988642906123912, "verdict": "improved", "outliers": 0, "disturbed": 0, "unit": "sample", "plausible_lo": null, "plausible_hi": null, "delta_pct": -1.0739001707640083, "interval": [0.9797500340535813, 0.9988642906123912]}}, "by": "engine"}, "commit_tree": "59025136895903b510ca660b70f192b7c12105ff", "keep_status": "keep"}');
CREATE TABLE meta (
  key   TEXT PRIMARY KEY,
  value TEXT NOT NULL
);
INSERT INTO "meta" VALUES('schema_version','2');
INSERT INTO "meta" VALUES('tag','"fake-done"');
INSERT INTO "meta" VALUES('repo','"@REPO@"');
INSERT INTO "meta" VALUES('baseline_commit','"472bd1111caf18b5f2afa3de33f1f1743964b83e"');
INSERT INTO "meta" VALUES('created_at','1795338000.0');
INSERT INTO "meta" VALUES('state','"stopped"');
INSERT INTO "meta" VALUES('stop_reason','"--max-iters 3 reached in this session"');
INSERT INTO "meta" VALUES('config_source','"@REPO@/kopt.toml"');
INSERT INTO "meta" VALUES('heartbeat','{"t": 1795338007.1902993, "pid": 23481}');
INSERT INTO "meta" VALUES('engine_pid','null');
INSERT INTO "meta" VALUES('engine_started_at','1795338000.1483364');
INSERT INTO "meta" VALUES('last_error','null');
INSERT INTO "meta" VALUES('progress','null');
INSERT INTO "meta" VALUES('gpu','{"chosen": null, "waited_s": 0.002632380000250123, "assessments": [], "t": 1795338006.478792, "lane": 0, "host": "local"}');
INSERT INTO "meta" VALUES('live_log','"@ROOT@/fake-done/logs/v3/eval_r3_best.out"');
INSERT INTO "meta" VALUES('child_pgid','null');
INSERT INTO "meta" VALUES('config_columns','["shape", "cls", "n"]');
INSERT INTO "meta" VALUES('classes','["cls=large", "cls=small"]');
INSERT INTO "meta" VALUES('environment','{"captured_at": "2026-11-24T16:46:04+0000", "host": "vm", "platform": "Linux-6.18.44-fc-v657-x86_64-with-glibc2.36", "kopt_python": {"executable": "/work/wt-tui/.venv/bin/python", "version": "3.11.7"}, "bench_python": {"found_by": "`/work/wt-tui/.venv/bin/python` from the bench command", "executable": "/work/wt-tui/.venv/bin/python", "version": "3.11.7", "implementation": "CPython", "torch": "2.13.0+cpu", "triton": "3.9.0", "numpy": "2.4.6", "torch_cuda": null, "torch_hip": null, "torch_git": "cf30153c4c131c8164ee7798e5022d810682e2cb"}, "gpu_software": {"vendor": "none", "note": "[gpu].vendor = \"none\": CPU-only target"}, "compile_flags": "", "target_env": {}}');
INSERT INTO "meta" VALUES('live_classes','{"version": 3, "stage": "eval", "verdict": {"verdict": "keep", "reason": "cls=large \u22121.1% faster (every class improved)", "rounds": 4, "gpu_seconds": 1.446098513000834, "flags": [], "focus": "cls=large", "classes": {"cls=large": {"cls": "cls=large", "rounds": 4, "n": 4, "best": 157.89756185594172, "cand": 156.17852976863801, "ratio": 0.9891129915680891, "lo": 0.9793473990782743, "hi": 0.998975961961564, "verdict": "improved", "outliers": 0, "disturbed": 0, "unit": "sample", "plausible_lo": null, "plausible_hi": null, "delta_pct": -1.0887008431910927, "interval": [0.9793473990782743, 0.998975961961564]}, "cls=small": {"cls": "cls=small", "rounds": 4, "n": 4, "best": 11.252608965419391, "cand": 11.131767178524349, "ratio": 0.9892609982923599, "lo": 0.9797500340535813, "hi": 0.9988642906123912, "verdict": "improved", "outliers": 0, "disturbed": 0, "unit": "sample", "plausible_lo": null, "plausible_hi": null, "delta_pct": -1.0739001707640083, "interval": [0.9797500340535813, 0.9988642906123912]}}}}');
INSERT INTO "meta" VALUES('active_s','7.0848031159998754');
INSERT INTO "meta" VALUES('stop_time','1795338007.2356849');
INSERT INTO "meta" VALUES('best_commit','"c3f594a551bd38566a84a82b66630a93e6f906cd"');
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
  flagged INTEGER NOT NULL DEFAULT 0
);
INSERT INTO "samples" VALUES(1,0,'baseline',0,0,'best','shape=s0,cls=small,n=128','cls=small',10.000433,1.79533800050316929815e+09,'',0);
INSERT INTO "samples" VALUES(2,0,'baseline',0,0,'best','shape=s1,cls=small,n=256','cls=small',14.03363,1.79533800050316929815e+09,'',0);
INSERT INTO "samples" VALUES(3,0,'baseline',0,0,'best','shape=s2,cls=large,n=4096','cls=large',119.653542,1.79533800050316929815e+09,'',0);
INSERT INTO "samples" VALUES(4,0,'baseline',0,0,'best','shape=s3,cls=large,n=8192','cls=large',230.65054,1.79533800050316929815e+09,'',0);
INSERT INTO "samples" VALUES(5,0,'baseline',1,0,'best','shape=s0,cls=small,n=128','cls=small',10.009904,1.79533800068842315676e+09,'',0);
INSERT INTO "samples" VALUES(6,0,'baseline',1,0,'best','shape=s1,cls=small,n=256','cls=small',13.949516,1.79533800068842315676e+09,'',0);
INSERT INTO "samples" VALUES(7,0,'baseline',1,0,'best','shape=s2,cls=large,n=4096','cls=large',119.741656,1.79533800068842315676e+09,'',0);
INSERT INTO "samples" VALUES(8,0,'baseline',1,0,'best','shape=s3,cls=large,n=8192','cls=large',230.023755,1.79533800068842315676e+09,'',0);
INSERT INTO "samples" VALUES(9,0,'baseline',2,0,'best','shape=s0,cls=small,n=128','cls=small',9.984182,1.79533800089665699002e+09,'',0);
INSERT INTO "samples" VALUES(10,0,'baseline',2,0,'best','shape=s1,cls=small,n=256','cls=small',14.008852,1.79533800089665699002e+09,'',0);
INSERT INTO "samples" VALUES(11,0,'baseline',2,0,'best','shape=s2,cls=large,n=4096','cls=large',120.23181,1.79533800089665699002e+09,'',0);
INSERT INTO "samples" VALUES(12,0,'baseline',2,0,'best','shape=s3,cls=large,n=8192','cls=large',229.154873,1.79533800089665699002e+09,'',0);
INSERT INTO "samples" VALUES(13,1,'eval',0,0,'best','shape=s0,cls=small,n=128','cls=small',10.024778,1.79533800192464971547e+09,'AB',0);
INSERT INTO "samples" VALUES(14,1,'eval',0,0,'cand','shape=s0,cls=small,n=128','cls=small',9.523963,1.79533800192464971547e+09,'AB',0);
INSERT INTO "samples" VALUES(15,1,'eval',0,0,'best','shape=s1,cls=small,n=256','cls=small',14.002674,1.79533800192464971547e+09,'AB',0);
INSERT INTO "samples" VALUES(16,1,'eval',0,0,'cand','shape=s1,cls=small,n=256','cls=small',13.331337,1.79533800192464971547e+09,'AB',0);
INSERT INTO "samples" VALUES(17,1,'eval',0,0,'best','shape=s2,cls=large,n=4096','cls=large',120.167029,1.79533800192464971547e+09,'AB',0);
INSERT INTO "samples" VALUES(18,1,'eval',0,0,'cand','shape=s2,cls=large,n=4096','cls=large',113.795613,1.79533800192464971547e+09,'AB',0);
INSERT INTO "samples" VALUES(19,1,'eval',0,0,'best','shape=s3,cls=large,n=8192','cls=large',229.969881,1.79533800192464971547e+09,'AB',0);
INSERT INTO "samples" VALUES(20,1,'eval',0,0,'cand','shape=s3,cls=large,n=8192','cls=large',218.102094,1.79533800192464971547e+09,'AB',0);
INSERT INTO "samples" VALUES(21,1,'eval',1,0,'best','shape=s0,cls=small,n=128','cls=small',9.988891,1.79533800230906915662e+09,'BA',0);
INSERT INTO "samples" VALUES(22,1,'eval',1,0,'cand','shape=s0,cls=small,n=128','cls=small',9.49675,1.79533800230906915662e+09,'BA',0);
INSERT INTO "samples" VALUES(23,1,'eval',1,0,'best','shape=s1,cls=small,n=256','cls=small',13.973637,1.79533800230906915662e+09,'BA',0);
INSERT INTO "samples" VALUES(24,1,'eval',1,0,'cand','shape=s1,cls=small,n=256','cls=small',13.327498,1.79533800230906915662e+09,'BA',0);
INSERT INTO "samples" VALUES(25,1,'eval',1,0,'best','shape=s2,cls=large,n=4096','cls=large',120.101586,1.79533800230906915662e+09,'BA',0);
INSERT INTO "samples" VALUES(26,1,'eval',1,0,'cand','shape=s2,cls=large,n=4096','cls=large',113.889152,1.79533800230906915662e+09,'BA',0);
INSERT INTO "samples" VALUES(27,1,'eval',1,0,'best','shape=s3,cls=large,n=8192','cls=large',231.008151,1.79533800230906915662e+09,'BA',0);
INSERT INTO "samples" VALUES(28,1,'eval',1,0,'cand','shape=s3,cls=large,n=8192','cls=large',218.938121,1.79533800230906915662e+09,'BA',0);
INSERT INTO "samples" VALUES(29,1,'eval',2,0,'best','shape=s0,cls=small,n=128','cls=small',9.987873,1.79533800261706376075e+09,'AB',0);
INSERT INTO "samples" VALUES(30,1,'eval',2,0,'cand','shape=s0,cls=small,n=128','cls=small',9.5035,1.79533800261706376075e+09,'AB',0);
INSERT INTO "samples" VALUES(31,1,'eval',2,0,'best','shape=s1,cls=small,n=256','cls=small',13.995624,1.79533800261706376075e+09,'AB',0);
INSERT INTO "samples" VALUES(32,1,'eval',2,0,'cand','shape=s1,cls=small,n=256','cls=small',13.275888,1.79533800261706376075e+09,'AB',0);
INSERT INTO "samples" VALUES(33,1,'eval',2,0,'best','shape=s2,cls=large,n=4096','cls=large',120.098416,1.79533800261706376075e+09,'AB',0);
INSERT INTO "samples" VALUES(34,1,'eval',2,0,'cand','shape=s2,cls=large,n=4096','cls=large',113.915516,1.79533800261706376075e+09,'AB',0);
INSERT INTO "samples" VALUES(35,1,'eval',2,0,'best','shape=s3,cls=large,n=8192','cls=large',230.056591,1.79533800261706376075e+09,'AB',0);
INSERT INTO "samples" VALUES(36,1,'eval',2,0,'cand','shape=s3,cls=large,n=8192','cls=large',218.37814,1.79533800261706376075e+09,'AB',0);
INSERT INTO "samples" VALUES(37,2,'eval',0,0,'best','shape=s0,cls=small,n=128','cls=small',9.468208,1.79533800362854123119e+09,'AB',0);
INSERT INTO "samples" VALUES(38,2,'eval',0,0,'cand','shape=s0,cls=small,n=128','cls=small',9.984161,1.79533800362854123119e+09,'AB',0);
INSERT INTO "samples" VALUES(39,2,'eval',0,0,'best','shape=s1,cls=small,n=256','cls=small',13.332745,1.79533800362854123119e+09,'AB',0);
INSERT INTO "samples" VALUES(40,2,'eval',0,0,'cand','shape=s1,cls=small,n=256','cls=small',13.946419,1.79533800362854123119e+09,'AB',0);
INSERT INTO "samples" VALUES(41,2,'eval',0,0,'best','shape=s2,cls=large,n=4096','cls=large',114.078437,1.79533800362854123119e+09,'AB',0);
INSERT INTO "samples" VALUES(42,2,'eval',0,0,'cand','shape=s2,cls=large,n=4096','cls=large',119.19173,1.79533800362854123119e+09,'AB',0);
INSERT INTO "samples" VALUES(43,2,'eval',0,0,'best','shape=s3,cls=large,n=8192','cls=large',218.180578,1.79533800362854123119e+09,'AB',0);
INSERT INTO "samples" VALUES(44,2,'eval',0,0,'cand','shape=s3,cls=large,n=8192','cls=large',228.730559,1.79533800362854123119e+09,'AB',0);
INSERT INTO "samples" VALUES(45,2,'eval',1,0,'best','shape=s0,cls=small,n=128','cls=small',9.496596,1.79533800404596829416e+09,'BA',0);
INSERT INTO "samples" VALUES(46,2,'eval',1,0,'cand','shape=s0,cls=small,n=128','cls=small',9.980529,1.79533800404596829416e+09,'BA',0);
INSERT INTO "samples" VALUES(47,2,'eval',1,0,'best','shape=s1,cls=small,n=256','cls=small',13.310048,1.79533800404596829416e+09,'BA',0);
INSERT INTO "samples" VALUES(48,2,'eval',1,0,'cand','shape=s1,cls=small,n=256','cls=small',13.927416,1.79533800404596829416e+09,'BA',0);
INSERT INTO "samples" VALUES(49,2,'eval',1,0,'best','shape=s2,cls=large,n=4096','cls=large',113.895147,1.79533800404596829416e+09,'BA',0);
INSERT INTO "samples" VALUES(50,2,'eval',1,0,'cand','shape=s2,cls=large,n=4096','cls=large',120.217832,1.79533800404596829416e+09,'BA',0);
INSERT INTO "samples" VALUES(51,2,'eval',1,0,'best','shape=s3,cls=large,n=8192','cls=large',218.655146,1.79533800404596829416e+09,'BA',0);
INSERT INTO "samples" VALUES(52,2,'eval',1,0,'cand','shape=s3,cls=large,n=8192','cls=large',230.056782,1.79533800404596829416e+09,'BA',0);
INSERT INTO "samples" VALUES(53,2,'eval',2,0,'best','shape=s0,cls=small,n=128','cls=small',9.541073,1.79533800436263060564e+09,'AB',0);
INSERT INTO "samples" VALUES(54,2,'eval',2,0,'cand','shape=s0,cls=small,n=128','cls=small',9.990713,1.79533800436263060564e+09,'AB',0);
INSERT INTO "samples" VALUES(55,2,'eval',2,0,'best','shape=s1,cls=small,n=256','cls=small',13.285737,1.79533800436263060564e+09,'AB',0);
INSERT INTO "samples" VALUES(56,2,'eval',2,0,'cand','shape=s1,cls=small,n=256','cls=small',13.939123,1.79533800436263060564e+09,'AB',0);
INSERT INTO "samples" VALUES(57,2,'eval',2,0,'best','shape=s2,cls=large,n=4096','cls=large',113.94334,1.79533800436263060564e+09,'AB',0);
INSERT INTO "samples" VALUES(58,2,'eval',2,0,'cand','shape=s2,cls=large,n=4096','cls=large',1.19867285999999992894e+02,1.79533800436263060564e+09,'AB',0);
INSERT INTO "samples" VALUES(59,2,'eval',2,0,'best','shape=s3,cls=large,n=8192','cls=large',219.070245,1.79533800436263060564e+09,'AB',0);
INSERT INTO "samples" VALUES(60,2,'eval',2,0,'cand','shape=s3,cls=large,n=8192','cls=large',229.083184,1.79533800436263060564e+09,'AB',0);
INSERT INTO "samples" VALUES(61,2,'eval',3,0,'best','shape=s0,cls=small,n=128','cls=small',9.506263,1.79533800476607298844e+09,'BA',0);
INSERT INTO "samples" VALUES(62,2,'eval',3,0,'cand','shape=s0,cls=small,n=128','cls=small',10.019945,1.79533800476607298844e+09,'BA',0);
INSERT INTO "samples" VALUES(63,2,'eval',3,0,'best','shape=s1,cls=small,n=256','cls=small',13.253869,1.79533800476607298844e+09,'BA',0);
INSERT INTO "samples" VALUES(64,2,'eval',3,0,'cand','shape=s1,cls=small,n=256','cls=small',13.987364,1.79533800476607298844e+09,'BA',0);
INSERT INTO "samples" VALUES(65,2,'eval',3,0,'best','shape=s2,cls=large,n=4096','cls=large',113.840791,1.79533800476607298844e+09,'BA',0);
INSERT INTO "samples" VALUES(66,2,'eval',3,0,'cand','shape=s2,cls=large,n=4096','cls=large',119.638206,1.79533800476607298844e+09,'BA',0);
INSERT INTO "samples" VALUES(67,2,'eval',3,0,'best','shape=s3,cls=large,n=8192','cls=large',218.690481,1.79533800476607298844e+09,'BA',0);
INSERT INTO "samples" VALUES(68,2,'eval',3,0,'cand','shape=s3,cls=large,n=8192','cls=large',229.545321,1.79533800476607298844e+09,'BA',0);
INSERT INTO "samples" VALUES(69,3,'eval',0,0,'best','shape=s0,cls=small,n=128','cls=small',9.51481,1.79533800562653589249e+09,'AB',0);
INSERT INTO "samples" VALUES(70,3,'eval',0,0,'cand','shape=s0,cls=small,n=128','cls=small',9.398984,1.79533800562653589249e+09,'AB',0);
INSERT INTO "samples" VALUES(71,3,'eval',0,0,'best','shape=s1,cls=small,n=256','cls=small',13.352651,1.79533800562653589249e+09,'AB',0);
INSERT INTO "samples" VALUES(72,3,'eval',0,0,'cand','shape=s1,cls=small,n=256','cls=small',13.167372,1.79533800562653589249e+09,'AB',0);
INSERT INTO "samples" VALUES(73,3,'eval',0,0,'best','shape=s2,cls=large,n=4096','cls=large',113.942304,1.79533800562653589249e+09,'AB',0);
INSERT INTO "samples" VALUES(74,3,'eval',0,0,'cand','shape=s2,cls=large,n=4096','cls=large',112.946255,1.79533800562653589249e+09,'AB',0);
INSERT INTO "samples" VALUES(75,3,'eval',0,0,'best','shape=s3,cls=large,n=8192','cls=large',218.680962,1.79533800562653589249e+09,'AB',0);
INSERT INTO "samples" VALUES(76,3,'eval',0,0,'cand','shape=s3,cls=large,n=8192','cls=large',216.628505,1.79533800562653589249e+09,'AB',0);
INSERT INTO "samples" VALUES(77,3,'eval',1,0,'best','shape=s0,cls=small,n=128','cls=small',9.505649,1.79533800606260228157e+09,'BA',0);
INSERT INTO "samples" VALUES(78,3,'eval',1,0,'cand','shape=s0,cls=small,n=128','cls=small',9.436031,1.79533800606260228157e+09,'BA',0);
INSERT INTO "samples" VALUES(79,3,'eval',1,0,'best','shape=s1,cls=small,n=256','cls=small',13.292817,1.79533800606260228157e+09,'BA',0);
INSERT INTO "samples" VALUES(80,3,'eval',1,0,'cand','shape=s1,cls=small,n=256','cls=small',13.139519,1.79533800606260228157e+09,'BA',0);
INSERT INTO "samples" VALUES(81,3,'eval',1,0,'best','shape=s2,cls=large,n=4096','cls=large',114.426704,1.79533800606260228157e+09,'BA',0);
INSERT INTO "samples" VALUES(82,3,'eval',1,0,'cand','shape=s2,cls=large,n=4096','cls=large',112.830252,1.79533800606260228157e+09,'BA',0);
INSERT INTO "samples" VALUES(83,3,'eval',1,0,'best','shape=s3,cls=large,n=8192','cls=large',218.275029,1.79533800606260228157e+09,'BA',0);
INSERT INTO "samples" VALUES(84,3,'eval',1,0,'cand','shape=s3,cls=large,n=8192','cls=large',216.119877,1.79533800606260228157e+09,'BA',0);
INSERT INTO "samples" VALUES(85,3,'eval',2,0,'best','shape=s0,cls=small,n=128','cls=small',9.498126,1.79533800644421577454e+09,'AB',0);
INSERT INTO "samples" VALUES(86,3,'eval',2,0,'cand','shape=s0,cls=small,n=128','cls=small',9.397959,1.79533800644421577454e+09,'AB',0);
INSERT INTO "samples" VALUES(87,3,'eval',2,0,'best','shape=s1,cls=small,n=256','cls=small',13.291456,1.79533800644421577454e+09,'AB',0);
INSERT INTO "samples" VALUES(88,3,'eval',2,0,'cand','shape=s1,cls=small,n=256','cls=small',13.155167,1.79533800644421577454e+09,'AB',0);
INSERT INTO "samples" VALUES(89,3,'eval',2,0,'best','shape=s2,cls=large,n=4096','cls=large',114.272292,1.79533800644421577454e+09,'AB',0);
INSERT INTO "samples" VALUES(90,3,'eval',2,0,'cand','shape=s2,cls=large,n=4096','cls=large',112.718039,1.79533800644421577454e+09,'AB',0);
INSERT INTO "samples" VALUES(91,3,'eval',2,0,'best','shape=s3,cls=large,n=8192','cls=large',218.234429,1.79533800644421577454e+09,'AB',0);
INSERT INTO "samples" VALUES(92,3,'eval',2,0,'cand','shape=s3,cls=large,n=8192','cls=large',215.727203,1.79533800644421577454e+09,'AB',0);
INSERT INTO "samples" VALUES(93,3,'eval',3,0,'best','shape=s0,cls=small,n=128','cls=small',9.50773,1.79533800701398062703e+09,'BA',0);
INSERT INTO "samples" VALUES(94,3,'eval',3,0,'cand','shape=s0,cls=small,n=128','cls=small',9.411476,1.79533800701398062703e+09,'BA',0);
INSERT INTO "samples" VALUES(95,3,'eval',3,0,'best','shape=s1,cls=small,n=256','cls=small',13.340499,1.79533800701398062703e+09,'BA',0);
INSERT INTO "samples" VALUES(96,3,'eval',3,0,'cand','shape=s1,cls=small,n=256','cls=small',13.206156,1.79533800701398062703e+09,'BA',0);
INSERT INTO "samples" VALUES(97,3,'eval',3,0,'best','shape=s2,cls=large,n=4096','cls=large',114.084248,1.79533800701398062703e+09,'BA',0);
INSERT INTO "samples" VALUES(98,3,'eval',3,0,'cand','shape=s2,cls=large,n=4096','cls=large',112.707054,1.79533800701398062703e+09,'BA',0);
INSERT INTO "samples" VALUES(99,3,'eval',3,0,'best','shape=s3,cls=large,n=8192','cls=large',218.215747,1.79533800701398062703e+09,'BA',0);
INSERT INTO "samples" VALUES(100,3,'eval',3,0,'cand','shape=s3,cls=large,n=8192','cls=large',216.477866,1.79533800701398062703e+09,'BA',0);
CREATE INDEX samples_by_version ON samples (version, stage);
CREATE INDEX commands_pending ON commands (status, id);
COMMIT;
