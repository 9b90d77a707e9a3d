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
INSERT INTO "events" VALUES(1,1.79533800000590109823e+09,NULL,'info','init','created from @REPO@ at fa3b081130f5',NULL);
INSERT INTO "events" VALUES(2,1.79533800103787899013e+09,NULL,'info','engine','engine started (pid 23608, proposer command)',NULL);
INSERT INTO "events" VALUES(3,1.7953380011393547058e+09,0,'info','baseline','measuring the unmodified baseline',NULL);
INSERT INTO "events" VALUES(4,1.79533800315499329561e+09,NULL,'warn','gpu','using GPU 1 (NVIDIA H100 80GB HBM3, GPU-9f3b77c4)',NULL);
INSERT INTO "events" VALUES(5,1795338007.54905,0,'info','verdict','v0: baseline: baseline over 4 configs in 2 classes',NULL);
INSERT INTO "events" VALUES(6,1.79533800758186531066e+09,1,'info','iteration','v1 started from fa3b081130',NULL);
INSERT INTO "events" VALUES(7,1.79533801173391938206e+09,1,'info','plan','v1: gain5: scripted hypothesis for v1 [global]',NULL);
INSERT INTO "events" VALUES(8,1795338023.34591,1,'info','decision','v1 eval: keep: cls=large −5.8% faster (every class improved) (5 rounds, 1.2 GPU-s)',NULL);
INSERT INTO "events" VALUES(9,1.79533802344616055489e+09,1,'info','verdict','v1: keep: cls=large −5.8% faster (every class improved)',NULL);
INSERT INTO "events" VALUES(10,1.79533802351342082026e+09,2,'info','iteration','v2 started from c79e610054',NULL);
INSERT INTO "events" VALUES(11,1.79533802763517546649e+09,2,'info','plan','v2: split: faster small rows, slower large [class cls=small]',NULL);
INSERT INTO "events" VALUES(12,1.79533803943626952171e+09,2,'info','decision','v2 eval: split: cls=small −5.0% faster but cls=large +5.0% slower: keep only as a specialised kernel behind a dispatch (5 rounds, 1.4 GPU-s)',NULL);
INSERT INTO "events" VALUES(13,1.79533803944394946099e+09,2,'warn','verdict','v2: split: cls=small −5.0% faster but cls=large +5.0% slower: keep only as a specialised kernel behind a dispatch',NULL);
INSERT INTO "events" VALUES(14,1.79533803950821375852e+09,3,'info','iteration','v3 started from c79e610054',NULL);
INSERT INTO "events" VALUES(15,1.79533804363792586326e+09,3,'info','plan','v3: nochange: scripted hypothesis for v3 [global]',NULL);
INSERT INTO "events" VALUES(16,1.79533804367888736729e+09,3,'warn','verdict','v3: fail_propose: the proposer changed nothing',NULL);
INSERT INTO "events" VALUES(17,1.79533804376482176781e+09,4,'info','iteration','v4 started from c79e610054',NULL);
INSERT INTO "events" VALUES(18,1.79533804788353085514e+09,4,'info','plan','v4: wrong_fixed_on_repair: scripted hypothesis for v4 [global]',NULL);
INSERT INTO "events" VALUES(19,1.79533805026029086109e+09,4,'warn','repair','v4: correctness fails (shape=s0,cls=small,n=128: fails ''err == 0'' (+3 more)); repair 1',NULL);
INSERT INTO "events" VALUES(20,1.79533806477163171769e+09,4,'info','decision','v4 eval: keep: cls=large −4.8% faster (every class improved) (5 rounds, 1.7 GPU-s)',NULL);
INSERT INTO "events" VALUES(21,1.79533806493793964388e+09,4,'info','verdict','v4: keep: cls=large −4.8% faster (every class improved)',NULL);
INSERT INTO "events" VALUES(22,1.795338065054079771e+09,5,'info','iteration','v5 started from ba0e609f56',NULL);
INSERT INTO "events" VALUES(23,1.79533806934005188945e+09,5,'info','plan','v5: protected: scripted hypothesis for v5 [global]',NULL);
INSERT INTO "events" VALUES(24,1.79533806943736958501e+09,5,'warn','verdict','v5: fail_protected: the candidate changes protected file(s): bench.py',NULL);
INSERT INTO "events" VALUES(25,1.7953380695913350582e+09,6,'info','iteration','v6 started from ba0e609f56',NULL);
INSERT INTO "events" VALUES(26,1.79533807386020088196e+09,6,'info','plan','v6: loss5: scripted hypothesis for v6 [global]',NULL);
INSERT INTO "events" VALUES(27,1.7953380864659826755e+09,6,'info','decision','v6 eval: regression: cls=large +4.8% slower (5 rounds, 1.9 GPU-s)',NULL);
INSERT INTO "events" VALUES(28,1.79533808650228691103e+09,6,'warn','verdict','v6: regression: cls=large +4.8% slower',NULL);
INSERT INTO "events" VALUES(29,1.7953380867224719525e+09,7,'info','iteration','v7 started from ba0e609f56',NULL);
INSERT INTO "events" VALUES(30,1.79533809106599259374e+09,7,'info','plan','v7: loss5: scripted hypothesis for v7 [global]',NULL);
INSERT INTO "events" VALUES(31,1.7953381037502117157e+09,7,'info','decision','v7 eval: regression: cls=small +5.5% slower (5 rounds, 1.9 GPU-s)',NULL);
INSERT INTO "events" VALUES(32,1.79533810378387188909e+09,7,'warn','verdict','v7: regression: cls=small +5.5% slower',NULL);
INSERT INTO "events" VALUES(33,1.79533810391408228876e+09,8,'info','iteration','v8 started from ba0e609f56',NULL);
INSERT INTO "events" VALUES(34,1.79533810816995096203e+09,8,'info','plan','v8: gain05: scripted hypothesis for v8 [global]',NULL);
INSERT INTO "events" VALUES(35,1.79533812758590793608e+09,8,'info','decision','v8 eval: borderline: cls=small −0.9% undecided after 8 rounds (cls=large resolved at the final look: what would matter is ruled out at 80%) (8 rounds, 2.5 GPU-s)',NULL);
INSERT INTO "events" VALUES(36,1.79533812761021780964e+09,8,'warn','review','v8 is borderline: cls=small −0.9% undecided after 8 rounds (cls=large resolved at the final look: what would matter is ruled out at 80%); awaiting the engineer',NULL);
INSERT INTO "events" VALUES(37,1.79533812770983815191e+09,NULL,'info','command','masked v3 (make_fixture, offline)',NULL);
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
INSERT INTO "iterations" VALUES(0,'baseline','done',0,NULL,'baseline (unmodified)',NULL,'global','fa3b081130f5efa84f08711e8d11bc12f67d9890','fa3b081130f5efa84f08711e8d11bc12f67d9890',0,1.79533800109006357187e+09,1.79533800754857420919e+09,'{"timings": {"gate_wait_s": 6.0238, "total_s": 6.4585, "engine_s": 0.4347}, "gpu": {"before": {"index": 1, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-9f3b77c4", "util_pct": 0.0, "mem_used_mib": 3.0, "mem_total_mib": 81559.0, "processes": [], "sm_clock_mhz": null, "mem_clock_mhz": null, "temp_c": null, "power_w": null, "throttle": [], "throttle_counters": null, "vendor": "nvidia", "backend": "fake", "extra": {}, "time": "2026-11-24T16:43:58+0000", "foreign_processes": []}, "after": {"index": 1, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-9f3b77c4", "util_pct": 0.0, "mem_used_mib": 3.0, "mem_total_mib": 81559.0, "processes": [], "sm_clock_mhz": null, "mem_clock_mhz": null, "temp_c": null, "power_w": null, "throttle": [], "throttle_counters": null, "vendor": "nvidia", "backend": "fake", "extra": {}, "time": "2026-11-24T16:44:02+0000", "foreign_processes": []}, "host": "local", "index": 1, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-9f3b77c4"}, "classes": {"cls=large": {"best": 165.05918133553243, "configs": 2}, "cls=small": {"best": 11.82196603365531, "configs": 2}}, "configs": {"shape=s0,cls=small,n=128": {"cls": "cls=small", "production": true, "row": {"shape": "s0", "cls": "small", "n": 128}}, "shape=s1,cls=small,n=256": {"cls": "cls=small", "production": true, "row": {"shape": "s1", "cls": "small", "n": 256}}, "shape=s2,cls=large,n=4096": {"cls": "cls=large", "production": true, "row": {"shape": "s2", "cls": "large", "n": 4096}}, "shape=s3,cls=large,n=8192": {"cls": "cls=large", "production": true, "row": {"shape": "s3", "cls": "large", "n": 8192}}}, "config_columns": ["shape", "cls", "n"], "decision": {"verdict": "baseline", "reason": "baseline over 4 configs in 2 classes", "by": "engine"}}');
INSERT INTO "iterations" VALUES(1,'keep','done',0,0,'gain5: scripted hypothesis for v1',NULL,'global','c79e6100545f7fa5758adaa64ac60f6ee0f9f082','fa3b081130f5efa84f08711e8d11bc12f67d9890',0,1.79533800758115077026e+09,1.79533802344143366813e+09,'{"lane": 0, "timings": {"gate_wait_s": 14.0428, "proposer_s": 0.1118, "police_s": 0.076, "looks_s": [0.2057, 0.2445, 0.3002, 0.2783, 0.2998], "commit_s": 0.0785, "total_s": 15.8603, "engine_s": 0.3772}, "proposal": {"command": "/work/wt-tui/.venv/bin/python /work/wt-tui/tests/fake_target/proposer.py", "exit": 0, "seconds": 0.1}, "changed_files": ["kernel.json"], "evaluated_tree": "237097cb32e103e70236149e18cdee2239997b99", "gpu": {"before": {"index": 1, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-9f3b77c4", "util_pct": 0.0, "mem_used_mib": 3.0, "mem_total_mib": 81559.0, "processes": [], "sm_clock_mhz": null, "mem_clock_mhz": null, "temp_c": null, "power_w": null, "throttle": [], "throttle_counters": null, "vendor": "nvidia", "backend": "fake", "extra": {}, "time": "2026-11-24T16:44:08+0000", "foreign_processes": []}, "after": {"index": 1, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-9f3b77c4", "util_pct": 0.0, "mem_used_mib": 3.0, "mem_total_mib": 81559.0, "processes": [], "sm_clock_mhz": null, "mem_clock_mhz": null, "temp_c": null, "power_w": null, "throttle": [], "throttle_counters": null, "vendor": "nvidia", "backend": "fake", "extra": {}, "time": "2026-11-24T16:44:18+0000", "foreign_processes": []}, "host": "local", "index": 1, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-9f3b77c4"}, "gpu_seconds": {"eval": 1.1623517879993415}, "classes": {"cls=large": {"cls": "cls=large", "rounds": 5, "n": 5, "best": 167.36701855130997, "cand": 157.59677496106636, "ratio": 0.9419522410040454, "lo": 0.9214256780260365, "hi": 0.9629360734045788, "verdict": "improved", "outliers": 0, "disturbed": 0, "unit": "sample", "plausible_lo": null, "plausible_hi": null, "delta_pct": -5.804775899595461, "interval": [0.9214256780260365, 0.9629360734045788]}, "cls=small": {"cls": "cls=small", "rounds": 5, "n": 5, "best": 11.87539869927419, "cand": 11.25159646759828, "ratio": 0.9488331818930748, "lo": 0.9224582197624985, "hi": 0.9759622579905344, "verdict": "improved", "outliers": 0, "disturbed": 0, "unit": "sample", "plausible_lo": null, "plausible_hi": null, "delta_pct": -5.1166818106925245, "interval": [0.9224582197624985, 0.9759622579905344]}}, "decision": {"verdict": "keep", "reason": "cls=large \u22125.8% faster (every class improved)", "rounds": 5, "gpu_seconds": 1.1623517879993415, "flags": [], "focus": "cls=large", "classes": {"cls=large": {"cls": "cls=large", "rounds": 5, "n": 5, "best": 167.36701855130997, "cand": 157.59677496106636, "ratio": 0.9419522410040454, "lo": 0.9214256780260365, "hi": 0.9629360734045788, "verdict": "improved", "outliers": 0, "disturbed": 0, "unit": "sample", "plausible_lo": null, "plausible_hi": null, "delta_pct": -5.804775899595461, "interval": [0.9214256780260365, 0.9629360734045788]}, "cls=small": {"cls": "cls=small", "rounds": 5, "n": 5, "best": 11.87539869927419, "cand": 11.25159646759828, "ratio": 0.9488331818930748, "lo": 0.9224582197624985, "hi": 0.9759622579905344, "verdict": "improved", "outliers": 0, "disturbed": 0, "unit": "sample", "plausible_lo": null, "plausible_hi": null, "delta_pct": -5.1166818106925245, "interval": [0.9224582197624985, 0.9759622579905344]}}, "by": "engine"}, "commit_tree": "237097cb32e103e70236149e18cdee2239997b99", "keep_status": "keep"}');
INSERT INTO "iterations" VALUES(2,'split','done',0,1,'split: faster small rows, slower large','cls=small','class',NULL,'c79e6100545f7fa5758adaa64ac60f6ee0f9f082',0,1.79533802351258063318e+09,1.79533803944221258168e+09,'{"lane": 0, "timings": {"gate_wait_s": 14.0503, "proposer_s": 0.0781, "police_s": 0.0368, "looks_s": [0.2981, 0.2924, 0.3938, 0.3427, 0.2433], "total_s": 15.9296, "engine_s": 0.2309}, "proposal": {"command": "/work/wt-tui/.venv/bin/python /work/wt-tui/tests/fake_target/proposer.py", "exit": 0, "seconds": 0.1}, "changed_files": ["kernel.json"], "evaluated_tree": "07cfc9c147fd71b4c2d03d6d4c4be686da107ee0", "gpu": {"before": {"index": 1, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-9f3b77c4", "util_pct": 0.0, "mem_used_mib": 3.0, "mem_total_mib": 81559.0, "processes": [], "sm_clock_mhz": null, "mem_clock_mhz": null, "temp_c": null, "power_w": null, "throttle": [], "throttle_counters": null, "vendor": "nvidia", "backend": "fake", "extra": {}, "time": "2026-11-24T16:44:24+0000", "foreign_processes": []}, "after": {"index": 1, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-9f3b77c4", "util_pct": 0.0, "mem_used_mib": 3.0, "mem_total_mib": 81559.0, "processes": [], "sm_clock_mhz": null, "mem_clock_mhz": null, "temp_c": null, "power_w": null, "throttle": [], "throttle_counters": null, "vendor": "nvidia", "backend": "fake", "extra": {}, "time": "2026-11-24T16:44:34+0000", "foreign_processes": []}, "host": "local", "index": 1, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-9f3b77c4"}, "gpu_seconds": {"eval": 1.3865434780000214}, "classes": {"cls=large": {"cls": "cls=large", "rounds": 5, "n": 5, "best": 157.62240766886907, "cand": 165.31627809962995, "ratio": 1.049522889254604, "lo": 1.0104198066836074, "hi": 1.0901392547763502, "verdict": "regressed", "outliers": 0, "disturbed": 0, "unit": "sample", "plausible_lo": null, "plausible_hi": null, "delta_pct": 4.952288925460402, "interval": [1.0104198066836074, 1.0901392547763502]}, "cls=small": {"cls": "cls=small", "rounds": 5, "n": 5, "best": 11.170461418656531, "cand": 10.624140434481491, "ratio": 0.9500988613450815, "lo": 0.9151949758533355, "hi": 0.9863339180676189, "verdict": "improved", "outliers": 0, "disturbed": 0, "unit": "sample", "plausible_lo": null, "plausible_hi": null, "delta_pct": -4.9901138654918515, "interval": [0.9151949758533355, 0.9863339180676189]}}, "decision": {"verdict": "split", "reason": "cls=small \u22125.0% faster but cls=large +5.0% slower: keep only as a specialised kernel behind a dispatch", "rounds": 5, "gpu_seconds": 1.3865434780000214, "flags": [], "focus": "cls=small", "classes": {"cls=large": {"cls": "cls=large", "rounds": 5, "n": 5, "best": 157.62240766886907, "cand": 165.31627809962995, "ratio": 1.049522889254604, "lo": 1.0104198066836074, "hi": 1.0901392547763502, "verdict": "regressed", "outliers": 0, "disturbed": 0, "unit": "sample", "plausible_lo": null, "plausible_hi": null, "delta_pct": 4.952288925460402, "interval": [1.0104198066836074, 1.0901392547763502]}, "cls=small": {"cls": "cls=small", "rounds": 5, "n": 5, "best": 11.170461418656531, "cand": 10.624140434481491, "ratio": 0.9500988613450815, "lo": 0.9151949758533355, "hi": 0.9863339180676189, "verdict": "improved", "outliers": 0, "disturbed": 0, "unit": "sample", "plausible_lo": null, "plausible_hi": null, "delta_pct": -4.9901138654918515, "interval": [0.9151949758533355, 0.9863339180676189]}}, "by": "engine"}}');
INSERT INTO "iterations" VALUES(3,'fail_propose','done',1,1,'nochange: scripted hypothesis for v3',NULL,'global',NULL,'c79e6100545f7fa5758adaa64ac60f6ee0f9f082',0,1.79533803950765871995e+09,1.79533804367610406874e+09,'{"lane": 0, "timings": {"gate_wait_s": 4.0156, "proposer_s": 0.0779, "police_s": 0.0439, "total_s": 4.1684, "engine_s": 0.0749}, "proposal": {"command": "/work/wt-tui/.venv/bin/python /work/wt-tui/tests/fake_target/proposer.py", "exit": 0, "seconds": 0.1}, "changed_files": [], "decision": {"verdict": "fail_propose", "reason": "the proposer changed nothing", "by": "engine"}}');
INSERT INTO "iterations" VALUES(4,'keep','done',0,1,'wrong_fixed_on_repair: scripted hypothesis for v4',NULL,'global','ba0e609f56654a200c40803c7a678acee5bdfcc3','c79e6100545f7fa5758adaa64ac60f6ee0f9f082',1,1.79533804375871539112e+09,1.79533806493412852285e+09,'{"lane": 0, "timings": {"gate_wait_s": 18.089, "proposer_s": 0.2189, "police_s": 0.129, "looks_s": [0.2821, 0.1819, 0.3532, 0.3048, 0.5155, 0.5328], "commit_s": 0.1475, "total_s": 21.1754, "engine_s": 0.6972}, "proposal": {"command": "/work/wt-tui/.venv/bin/python /work/wt-tui/tests/fake_target/proposer.py", "exit": 0, "seconds": 0.1}, "changed_files": ["kernel.json"], "evaluated_tree": "6a019c82f1436f4fd0be1234273bb37752b6fea5", "gpu": {"before": {"index": 1, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-9f3b77c4", "util_pct": 0.0, "mem_used_mib": 3.0, "mem_total_mib": 81559.0, "processes": [], "sm_clock_mhz": null, "mem_clock_mhz": null, "temp_c": null, "power_w": null, "throttle": [], "throttle_counters": null, "vendor": "nvidia", "backend": "fake", "extra": {}, "time": "2026-11-24T16:44:45+0000", "foreign_processes": []}, "after": {"index": 1, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-9f3b77c4", "util_pct": 0.0, "mem_used_mib": 3.0, "mem_total_mib": 81559.0, "processes": [], "sm_clock_mhz": null, "mem_clock_mhz": null, "temp_c": null, "power_w": null, "throttle": [], "throttle_counters": null, "vendor": "nvidia", "backend": "fake", "extra": {}, "time": "2026-11-24T16:44:59+0000", "foreign_processes": []}, "host": "local", "index": 1, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-9f3b77c4"}, "failing_rows": [{"config": "shape=s0,cls=small,n=128", "cls": "cls=small", "reasons": ["fails ''err == 0''"]}, {"config": "shape=s1,cls=small,n=256", "cls": "cls=small", "reasons": ["fails ''err == 0''"]}, {"config": "shape=s2,cls=large,n=4096", "cls": "cls=large", "reasons": ["fails ''err == 0''"]}, {"config": "shape=s3,cls=large,n=8192", "cls": "cls=large", "reasons": ["fails ''err == 0''"]}], "repairs": [{"command": "/work/wt-tui/.venv/bin/python /work/wt-tui/tests/fake_target/proposer.py", "exit": 0, "seconds": 0.1}], "gpu_seconds": {"eval": 1.6626909339997837}, "classes": {"cls=large": {"cls": "cls=large", "rounds": 5, "n": 5, "best": 157.45069626613454, "cand": 149.8853394492975, "ratio": 0.9522592140249642, "lo": 0.920281493266088, "hi": 0.9853480889604864, "verdict": "improved", "outliers": 0, "disturbed": 0, "unit": "sample", "plausible_lo": null, "plausible_hi": null, "delta_pct": -4.774078597503584, "interval": [0.920281493266088, 0.9853480889604864]}, "cls=small": {"cls": "cls=small", "rounds": 5, "n": 5, "best": 11.236907952883337, "cand": 10.706822943323205, "ratio": 0.9539332429474991, "lo": 0.9246513576169979, "hi": 0.9841424278503694, "verdict": "improved", "outliers": 0, "disturbed": 0, "unit": "sample", "plausible_lo": null, "plausible_hi": null, "delta_pct": -4.606675705250085, "interval": [0.9246513576169979, 0.9841424278503694]}}, "decision": {"verdict": "keep", "reason": "cls=large \u22124.8% faster (every class improved)", "rounds": 5, "gpu_seconds": 1.6626909339997837, "flags": [], "focus": "cls=large", "classes": {"cls=large": {"cls": "cls=large", "rounds": 5, "n": 5, "best": 157.45069626613454, "cand": 149.8853394492975, "ratio": 0.9522592140249642, "lo": 0.920281493266088, "hi": 0.9853480889604864, "verdict": "improved", "outliers": 0, "disturbed": 0, "unit": "sample", "plausible_lo": null, "plausible_hi": null, "delta_pct": -4.774078597503584, "interval": [0.920281493266088, 0.9853480889604864]}, "cls=small": {"cls": "cls=small", "rounds": 5, "n": 5, "best": 11.236907952883337, "cand": 10.706822943323205, "ratio": 0.9539332429474991, "lo": 0.9246513576169979, "hi": 0.9841424278503694, "verdict": "improved", "outliers": 0, "disturbed": 0, "unit": "sample", "plausible_lo": null, "plausible_hi": null, "delta_pct": -4.606675705250085, "interval": [0.9246513576169979, 0.9841424278503694]}}, "by": "engine"}, "commit_tree": "6a019c82f1436f4fd0be1234273bb37752b6fea5", "keep_status": "keep"}');
INSERT INTO "iterations" VALUES(5,'fail_protected','done',0,4,'protected: scripted hypothesis for v5',NULL,'global',NULL,'ba0e609f56654a200c40803c7a678acee5bdfcc3',0,1.7953380650465085507e+09,1.79533806943632030491e+09,'{"lane": 0, "timings": {"gate_wait_s": 4.0188, "proposer_s": 0.1998, "police_s": 0.0983, "total_s": 4.3898, "engine_s": 0.1712}, "proposal": {"command": "/work/wt-tui/.venv/bin/python /work/wt-tui/tests/fake_target/proposer.py", "exit": 0, "seconds": 0.2}, "changed_files": ["bench.py", "kernel.json"], "decision": {"verdict": "fail_protected", "reason": "the candidate changes protected file(s): bench.py", "by": "engine"}}');
INSERT INTO "iterations" VALUES(6,'regression','done',0,4,'loss5: scripted hypothesis for v6',NULL,'global',NULL,'ba0e609f56654a200c40803c7a678acee5bdfcc3',0,1.79533806959037590023e+09,1.79533808649805927274e+09,'{"lane": 0, "timings": {"gate_wait_s": 14.0852, "proposer_s": 0.1818, "police_s": 0.0874, "looks_s": [0.3988, 0.3849, 0.3886, 0.5194, 0.4477], "total_s": 16.9077, "engine_s": 0.5013}, "proposal": {"command": "/work/wt-tui/.venv/bin/python /work/wt-tui/tests/fake_target/proposer.py", "exit": 0, "seconds": 0.2}, "changed_files": ["kernel.json"], "evaluated_tree": "a269e81e925b5beabe5fa4877c9441340203884f", "gpu": {"before": {"index": 1, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-9f3b77c4", "util_pct": 0.0, "mem_used_mib": 3.0, "mem_total_mib": 81559.0, "processes": [], "sm_clock_mhz": null, "mem_clock_mhz": null, "temp_c": null, "power_w": null, "throttle": [], "throttle_counters": null, "vendor": "nvidia", "backend": "fake", "extra": {}, "time": "2026-11-24T16:45:11+0000", "foreign_processes": []}, "after": {"index": 1, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-9f3b77c4", "util_pct": 0.0, "mem_used_mib": 3.0, "mem_total_mib": 81559.0, "processes": [], "sm_clock_mhz": null, "mem_clock_mhz": null, "temp_c": null, "power_w": null, "throttle": [], "throttle_counters": null, "vendor": "nvidia", "backend": "fake", "extra": {}, "time": "2026-11-24T16:45:21+0000", "foreign_processes": []}, "host": "local", "index": 1, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-9f3b77c4"}, "gpu_seconds": {"eval": 1.8812714960004087}, "classes": {"cls=large": {"cls": "cls=large", "rounds": 5, "n": 5, "best": 150.42917834547026, "cand": 157.45662227549764, "ratio": 1.0476303839304542, "lo": 1.0214940195739548, "hi": 1.0744354840100079, "verdict": "regressed", "outliers": 0, "disturbed": 0, "unit": "sample", "plausible_lo": null, "plausible_hi": null, "delta_pct": 4.763038393045416, "interval": [1.0214940195739548, 1.0744354840100079]}, "cls=small": {"cls": "cls=small", "rounds": 5, "n": 5, "best": 10.730943523332195, "cand": 11.217821860979004, "ratio": 1.0457515579206151, "lo": 1.0012690385290053, "hi": 1.0922102639866198, "verdict": "regressed", "outliers": 0, "disturbed": 0, "unit": "sample", "plausible_lo": null, "plausible_hi": null, "delta_pct": 4.575155792061514, "interval": [1.0012690385290053, 1.0922102639866198]}}, "decision": {"verdict": "regression", "reason": "cls=large +4.8% slower", "rounds": 5, "gpu_seconds": 1.8812714960004087, "flags": [], "focus": "cls=large", "classes": {"cls=large": {"cls": "cls=large", "rounds": 5, "n": 5, "best": 150.42917834547026, "cand": 157.45662227549764, "ratio": 1.0476303839304542, "lo": 1.0214940195739548, "hi": 1.0744354840100079, "verdict": "regressed", "outliers": 0, "disturbed": 0, "unit": "sample", "plausible_lo": null, "plausible_hi": null, "delta_pct": 4.763038393045416, "interval": [1.0214940195739548, 1.0744354840100079]}, "cls=small": {"cls": "cls=small", "rounds": 5, "n": 5, "best": 10.730943523332195, "cand": 11.217821860979004, "ratio": 1.0457515579206151, "lo": 1.0012690385290053, "hi": 1.0922102639866198, "verdict": "regressed", "outliers": 0, "disturbed": 0, "unit": "sample", "plausible_lo": null, "plausible_hi": null, "delta_pct": 4.575155792061514, "interval": [1.0012690385290053, 1.0922102639866198]}}, "by": "engine"}}');
INSERT INTO "iterations" VALUES(7,'regression','done',0,4,'loss5: scripted hypothesis for v7',NULL,'global',NULL,'ba0e609f56654a200c40803c7a678acee5bdfcc3',0,1.79533808671071243292e+09,1.795338103777089119e+09,'{"lane": 0, "timings": {"gate_wait_s": 14.1028, "proposer_s": 0.2333, "police_s": 0.1359, "looks_s": [0.4925, 0.4723, 0.3773, 0.3422, 0.4719], "total_s": 17.0664, "engine_s": 0.5741}, "proposal": {"command": "/work/wt-tui/.venv/bin/python /work/wt-tui/tests/fake_target/proposer.py", "exit": 0, "seconds": 0.2}, "changed_files": ["kernel.json"], "evaluated_tree": "a269e81e925b5beabe5fa4877c9441340203884f", "gpu": {"before": {"index": 1, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-9f3b77c4", "util_pct": 0.0, "mem_used_mib": 3.0, "mem_total_mib": 81559.0, "processes": [], "sm_clock_mhz": null, "mem_clock_mhz": null, "temp_c": null, "power_w": null, "throttle": [], "throttle_counters": null, "vendor": "nvidia", "backend": "fake", "extra": {}, "time": "2026-11-24T16:45:28+0000", "foreign_processes": []}, "after": {"index": 1, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-9f3b77c4", "util_pct": 0.0, "mem_used_mib": 3.0, "mem_total_mib": 81559.0, "processes": [], "sm_clock_mhz": null, "mem_clock_mhz": null, "temp_c": null, "power_w": null, "throttle": [], "throttle_counters": null, "vendor": "nvidia", "backend": "fake", "extra": {}, "time": "2026-11-24T16:45:38+0000", "foreign_processes": []}, "host": "local", "index": 1, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-9f3b77c4"}, "gpu_seconds": {"eval": 1.927800126999955}, "classes": {"cls=large": {"cls": "cls=large", "rounds": 5, "n": 5, "best": 150.13686304533016, "cand": 157.419797656727, "ratio": 1.0489324631751566, "lo": 1.010593586315168, "hi": 1.0887258015504264, "verdict": "regressed", "outliers": 0, "disturbed": 0, "unit": "sample", "plausible_lo": null, "plausible_hi": null, "delta_pct": 4.893246317515665, "interval": [1.010593586315168, 1.0887258015504264]}, "cls=small": {"cls": "cls=small", "rounds": 5, "n": 5, "best": 10.653799505130856, "cand": 11.241546570461942, "ratio": 1.055455486632653, "lo": 1.021845411691961, "hi": 1.0901710488854117, "verdict": "regressed", "outliers": 0, "disturbed": 0, "unit": "sample", "plausible_lo": null, "plausible_hi": null, "delta_pct": 5.5455486632653095, "interval": [1.021845411691961, 1.0901710488854117]}}, "decision": {"verdict": "regression", "reason": "cls=small +5.5% slower", "rounds": 5, "gpu_seconds": 1.927800126999955, "flags": [], "focus": "cls=small", "classes": {"cls=large": {"cls": "cls=large", "rounds": 5, "n": 5, "best": 150.13686304533016, "cand": 157.419797656727, "ratio": 1.0489324631751566, "lo": 1.010593586315168, "hi": 1.0887258015504264, "verdict": "regressed", "outliers": 0, "disturbed": 0, "unit": "sample", "plausible_lo": null, "plausible_hi": null, "delta_pct": 4.893246317515665, "interval": [1.010593586315168, 1.0887258015504264]}, "cls=small": {"cls": "cls=small", "rounds": 5, "n": 5, "best": 10.653799505130856, "cand": 11.241546570461942, "ratio": 1.055455486632653, "lo": 1.021845411691961, "hi": 1.0901710488854117, "verdict": "regressed", "outliers": 0, "disturbed": 0, "unit": "sample", "plausible_lo": null, "plausible_hi": null, "delta_pct": 5.5455486632653095, "interval": [1.021845411691961, 1.0901710488854117]}}, "by": "engine"}}');
INSERT INTO "iterations" VALUES(8,'borderline','review',0,4,'gain05: scripted hypothesis for v8',NULL,'global',NULL,'ba0e609f56654a200c40803c7a678acee5bdfcc3',0,1.7953381039025039673e+09,NULL,'{"lane": 0, "timings": {"gate_wait_s": 20.1038, "proposer_s": 0.1531, "police_s": 0.0996, "looks_s": [0.3483, 0.4037, 0.3974, 0.3171, 0.3609, 0.3584, 0.3483, 0.2945]}, "proposal": {"command": "/work/wt-tui/.venv/bin/python /work/wt-tui/tests/fake_target/proposer.py", "exit": 0, "seconds": 0.1}, "changed_files": ["kernel.json"], "evaluated_tree": "eb5a29146437a443964ed8e40927147d66732454", "gpu": {"before": {"index": 1, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-9f3b77c4", "util_pct": 0.0, "mem_used_mib": 3.0, "mem_total_mib": 81559.0, "processes": [], "sm_clock_mhz": null, "mem_clock_mhz": null, "temp_c": null, "power_w": null, "throttle": [], "throttle_counters": null, "vendor": "nvidia", "backend": "fake", "extra": {}, "time": "2026-11-24T16:45:45+0000", "foreign_processes": []}, "after": {"index": 1, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-9f3b77c4", "util_pct": 0.0, "mem_used_mib": 3.0, "mem_total_mib": 81559.0, "processes": [], "sm_clock_mhz": null, "mem_clock_mhz": null, "temp_c": null, "power_w": null, "throttle": [], "throttle_counters": null, "vendor": "nvidia", "backend": "fake", "extra": {}, "time": "2026-11-24T16:46:02+0000", "foreign_processes": []}, "host": "local", "index": 1, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-9f3b77c4"}, "gpu_seconds": {"eval": 2.518514999999752}, "classes": {"cls=large": {"cls": "cls=large", "rounds": 8, "n": 8, "best": 149.74578414805916, "cand": 149.59729791795502, "ratio": 0.9990084112821682, "lo": 0.9750116975405765, "hi": 1.0235957253948618, "verdict": "undecided", "outliers": 0, "disturbed": 0, "unit": "sample", "plausible_lo": 0.9920546674178808, "plausible_hi": 1.006010896970186, "delta_pct": -0.09915887178317817, "interval": [0.9750116975405765, 1.0235957253948618]}, "cls=small": {"cls": "cls=small", "rounds": 8, "n": 8, "best": 10.705270386555208, "cand": 10.605951405988975, "ratio": 0.9907224220426073, "lo": 0.9827464145807364, "hi": 0.9987631630858863, "verdict": "undecided", "outliers": 0, "disturbed": 0, "unit": "sample", "plausible_lo": 0.9884244258150607, "plausible_hi": 0.9930257609008336, "delta_pct": -0.9277577957392702, "interval": [0.9827464145807364, 0.9987631630858863]}}, "decision": {"verdict": "borderline", "reason": "cls=small \u22120.9% undecided after 8 rounds (cls=large resolved at the final look: what would matter is ruled out at 80%)", "rounds": 8, "gpu_seconds": 2.518514999999752, "flags": ["undecided_at_max_rounds", "futility"], "focus": "cls=small", "classes": {"cls=large": {"cls": "cls=large", "rounds": 8, "n": 8, "best": 149.74578414805916, "cand": 149.59729791795502, "ratio": 0.9990084112821682, "lo": 0.9750116975405765, "hi": 1.0235957253948618, "verdict": "undecided", "outliers": 0, "disturbed": 0, "unit": "sample", "plausible_lo": 0.9920546674178808, "plausible_hi": 1.006010896970186, "delta_pct": -0.09915887178317817, "interval": [0.9750116975405765, 1.0235957253948618]}, "cls=small": {"cls": "cls=small", "rounds": 8, "n": 8, "best": 10.705270386555208, "cand": 10.605951405988975, "ratio": 0.9907224220426073, "lo": 0.9827464145807364, "hi": 0.9987631630858863, "verdict": "undecided", "outliers": 0, "disturbed": 0, "unit": "sample", "plausible_lo": 0.9884244258150607, "plausible_hi": 0.9930257609008336, "delta_pct": -0.9277577957392702, "interval": [0.9827464145807364, 0.9987631630858863]}}, "by": "engine"}, "review": {"opened_at": 1795338127.5985618, "deadline": 1795339927.5985582, "reason": "cls=small \u22120.9% undecided after 8 rounds (cls=large resolved at the final look: what would matter is ruled out at 80%)"}}');
CREATE TABLE meta (
  key   TEXT PRIMARY KEY,
  value TEXT NOT NULL
);
INSERT INTO "meta" VALUES('schema_version','2');
INSERT INTO "meta" VALUES('tag','"fake-review"');
INSERT INTO "meta" VALUES('repo','"@REPO@"');
INSERT INTO "meta" VALUES('baseline_commit','"fa3b081130f5efa84f08711e8d11bc12f67d9890"');
INSERT INTO "meta" VALUES('created_at','1795338000.0');
INSERT INTO "meta" VALUES('state','"awaiting_review"');
INSERT INTO "meta" VALUES('stop_reason','null');
INSERT INTO "meta" VALUES('config_source','"@REPO@/kopt.toml"');
INSERT INTO "meta" VALUES('heartbeat','{"t": 1795338126.6794767, "pid": 23608}');
INSERT INTO "meta" VALUES('engine_pid','23608');
INSERT INTO "meta" VALUES('engine_started_at','1795338001.0302124');
INSERT INTO "meta" VALUES('last_error','null');
INSERT INTO "meta" VALUES('progress','{"version": 8, "phase": "review", "step": "awaiting the engineer: 1800 s left", "done": null, "total": null, "phase_started_at": 1795338127.6180296, "eta_s": null, "t": 1795338127.6180298}');
INSERT INTO "meta" VALUES('gpu','{"chosen": {"index": 1, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-9f3b77c4", "util_pct": 0.0, "mem_used_mib": 3.0, "mem_total_mib": 81559.0, "processes": [], "sm_clock_mhz": null, "mem_clock_mhz": null, "temp_c": null, "power_w": null, "throttle": [], "throttle_counters": null, "vendor": "nvidia", "backend": "fake", "extra": {}}, "waited_s": 2.0081207949997406, "assessments": [{"gpu": {"index": 0, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-5c1d0e2a", "util_pct": 97.0, "mem_used_mib": 61234.0, "mem_total_mib": 81559.0, "processes": [{"pid": 4711, "name": "python train.py", "mem_mib": 61000.0, "user": null}], "sm_clock_mhz": null, "mem_clock_mhz": null, "temp_c": null, "power_w": null, "throttle": [], "throttle_counters": null, "vendor": "nvidia", "backend": "fake", "extra": {}}, "idle": false, "reasons": ["1 foreign process(es): 4711 python train.py 61000 MiB", "utilization up to 97% > 10%", "memory used 61234 MiB > 2048 MiB"], "notes": [], "samples": 3, "util_max_pct": 97.0, "mem_used_mib": 61234.0, "mem_growth_mib": 0.0, "foreign": [{"pid": 4711, "name": "python train.py", "user": null, "mem_mib": 61000.0}], "claimed_by": null}, {"gpu": {"index": 1, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-9f3b77c4", "util_pct": 0.0, "mem_used_mib": 3.0, "mem_total_mib": 81559.0, "processes": [], "sm_clock_mhz": null, "mem_clock_mhz": null, "temp_c": null, "power_w": null, "throttle": [], "throttle_counters": null, "vendor": "nvidia", "backend": "fake", "extra": {}}, "idle": true, "reasons": [], "notes": [], "samples": 3, "util_max_pct": 0.0, "mem_used_mib": 3.0, "mem_growth_mib": 0.0, "foreign": [], "claimed_by": null}], "t": 1795338127.2500894, "lane": 0, "host": "local"}');
INSERT INTO "meta" VALUES('live_log','"@ROOT@/fake-review/logs/v8/eval_r7_best.out"');
INSERT INTO "meta" VALUES('child_pgid','null');
INSERT INTO "meta" VALUES('config_columns','["shape", "cls", "n"]');
INSERT INTO "meta" VALUES('classes','["cls=large", "cls=small"]');
INSERT INTO "meta" VALUES('environment','{"captured_at": "2026-11-24T16:44:02+0000", "host": "vm", "platform": "Linux-6.18.44-fc-v657-x86_64-with-glibc2.36", "kopt_python": {"executable": "/work/wt-tui/.venv/bin/python", "version": "3.11.7"}, "bench_python": {"found_by": "`/work/wt-tui/.venv/bin/python` from the bench command", "executable": "/work/wt-tui/.venv/bin/python", "version": "3.11.7", "implementation": "CPython", "torch": "2.13.0+cpu", "triton": "3.9.0", "numpy": "2.4.6", "torch_cuda": null, "torch_hip": null, "torch_git": "cf30153c4c131c8164ee7798e5022d810682e2cb"}, "gpu_software": {"vendor": "fake", "note": "scripted GPUs (KOPT_FAKE_GPUS): no driver to read"}, "compile_flags": "", "target_env": {}}');
INSERT INTO "meta" VALUES('live_classes','{"version": 8, "stage": "eval", "verdict": {"verdict": "borderline", "reason": "cls=small \u22120.9% undecided after 8 rounds (cls=large resolved at the final look: what would matter is ruled out at 80%)", "rounds": 8, "gpu_seconds": 2.518514999999752, "flags": ["undecided_at_max_rounds", "futility"], "focus": "cls=small", "classes": {"cls=large": {"cls": "cls=large", "rounds": 8, "n": 8, "best": 149.74578414805916, "cand": 149.59729791795502, "ratio": 0.9990084112821682, "lo": 0.9750116975405765, "hi": 1.0235957253948618, "verdict": "undecided", "outliers": 0, "disturbed": 0, "unit": "sample", "plausible_lo": 0.9920546674178808, "plausible_hi": 1.006010896970186, "delta_pct": -0.09915887178317817, "interval": [0.9750116975405765, 1.0235957253948618]}, "cls=small": {"cls": "cls=small", "rounds": 8, "n": 8, "best": 10.705270386555208, "cand": 10.605951405988975, "ratio": 0.9907224220426073, "lo": 0.9827464145807364, "hi": 0.9987631630858863, "verdict": "undecided", "outliers": 0, "disturbed": 0, "unit": "sample", "plausible_lo": 0.9884244258150607, "plausible_hi": 0.9930257609008336, "delta_pct": -0.9277577957392702, "interval": [0.9827464145807364, 0.9987631630858863]}}}}');
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
INSERT INTO "samples" VALUES(1,0,'baseline',0,0,'best','shape=s0,cls=small,n=128','cls=small',10.036854,1.79533800324673509596e+09,'',0);
INSERT INTO "samples" VALUES(2,0,'baseline',0,0,'best','shape=s1,cls=small,n=256','cls=small',13.780369,1.79533800324673509596e+09,'',0);
INSERT INTO "samples" VALUES(3,0,'baseline',0,0,'best','shape=s2,cls=large,n=4096','cls=large',119.663236,1.79533800324673509596e+09,'',0);
INSERT INTO "samples" VALUES(4,0,'baseline',0,0,'best','shape=s3,cls=large,n=8192','cls=large',226.749241,1.79533800324673509596e+09,'',0);
INSERT INTO "samples" VALUES(5,0,'baseline',1,0,'best','shape=s0,cls=small,n=128','cls=small',10.1224,1.79533800533427500721e+09,'',0);
INSERT INTO "samples" VALUES(6,0,'baseline',1,0,'best','shape=s1,cls=small,n=256','cls=small',13.87584,1.79533800533427500721e+09,'',0);
INSERT INTO "samples" VALUES(7,0,'baseline',1,0,'best','shape=s2,cls=large,n=4096','cls=large',117.617904,1.79533800533427500721e+09,'',0);
INSERT INTO "samples" VALUES(8,0,'baseline',1,0,'best','shape=s3,cls=large,n=8192','cls=large',231.154793,1.79533800533427500721e+09,'',0);
INSERT INTO "samples" VALUES(9,0,'baseline',2,0,'best','shape=s0,cls=small,n=128','cls=small',10.169521,1.79533800742543768881e+09,'',0);
INSERT INTO "samples" VALUES(10,0,'baseline',2,0,'best','shape=s1,cls=small,n=256','cls=small',13.817724,1.79533800742543768881e+09,'',0);
INSERT INTO "samples" VALUES(11,0,'baseline',2,0,'best','shape=s2,cls=large,n=4096','cls=large',119.257734,1.79533800742543768881e+09,'',0);
INSERT INTO "samples" VALUES(12,0,'baseline',2,0,'best','shape=s3,cls=large,n=8192','cls=large',229.862774,1.79533800742543768881e+09,'',0);
INSERT INTO "samples" VALUES(13,1,'eval',0,0,'best','shape=s0,cls=small,n=128','cls=small',10.031473,1.7953380140881984233e+09,'AB',0);
INSERT INTO "samples" VALUES(14,1,'eval',0,0,'cand','shape=s0,cls=small,n=128','cls=small',9.433039,1.7953380140881984233e+09,'AB',0);
INSERT INTO "samples" VALUES(15,1,'eval',0,0,'best','shape=s1,cls=small,n=256','cls=small',14.1086,1.7953380140881984233e+09,'AB',0);
INSERT INTO "samples" VALUES(16,1,'eval',0,0,'cand','shape=s1,cls=small,n=256','cls=small',13.273663,1.7953380140881984233e+09,'AB',0);
INSERT INTO "samples" VALUES(17,1,'eval',0,0,'best','shape=s2,cls=large,n=4096','cls=large',121.038967,1.7953380140881984233e+09,'AB',0);
INSERT INTO "samples" VALUES(18,1,'eval',0,0,'cand','shape=s2,cls=large,n=4096','cls=large',115.261915,1.7953380140881984233e+09,'AB',0);
INSERT INTO "samples" VALUES(19,1,'eval',0,0,'best','shape=s3,cls=large,n=8192','cls=large',233.433432,1.7953380140881984233e+09,'AB',0);
INSERT INTO "samples" VALUES(20,1,'eval',0,0,'cand','shape=s3,cls=large,n=8192','cls=large',218.236294,1.7953380140881984233e+09,'AB',0);
INSERT INTO "samples" VALUES(21,1,'eval',1,0,'best','shape=s0,cls=small,n=128','cls=small',9.885761,1.7953380163663380146e+09,'BA',0);
INSERT INTO "samples" VALUES(22,1,'eval',1,0,'cand','shape=s0,cls=small,n=128','cls=small',9.592494,1.7953380163663380146e+09,'BA',0);
INSERT INTO "samples" VALUES(23,1,'eval',1,0,'best','shape=s1,cls=small,n=256','cls=small',14.224606,1.7953380163663380146e+09,'BA',0);
INSERT INTO "samples" VALUES(24,1,'eval',1,0,'cand','shape=s1,cls=small,n=256','cls=small',13.385769,1.7953380163663380146e+09,'BA',0);
INSERT INTO "samples" VALUES(25,1,'eval',1,0,'best','shape=s2,cls=large,n=4096','cls=large',120.731615,1.7953380163663380146e+09,'BA',0);
INSERT INTO "samples" VALUES(26,1,'eval',1,0,'cand','shape=s2,cls=large,n=4096','cls=large',114.212661,1.7953380163663380146e+09,'BA',0);
INSERT INTO "samples" VALUES(27,1,'eval',1,0,'best','shape=s3,cls=large,n=8192','cls=large',231.662219,1.7953380163663380146e+09,'BA',0);
INSERT INTO "samples" VALUES(28,1,'eval',1,0,'cand','shape=s3,cls=large,n=8192','cls=large',216.44597,1.7953380163663380146e+09,'BA',0);
INSERT INTO "samples" VALUES(29,1,'eval',2,0,'best','shape=s0,cls=small,n=128','cls=small',10.031876,1.79533801869489836695e+09,'AB',0);
INSERT INTO "samples" VALUES(30,1,'eval',2,0,'cand','shape=s0,cls=small,n=128','cls=small',9.586001,1.79533801869489836695e+09,'AB',0);
INSERT INTO "samples" VALUES(31,1,'eval',2,0,'best','shape=s1,cls=small,n=256','cls=small',14.207401,1.79533801869489836695e+09,'AB',0);
INSERT INTO "samples" VALUES(32,1,'eval',2,0,'cand','shape=s1,cls=small,n=256','cls=small',13.174785,1.79533801869489836695e+09,'AB',0);
INSERT INTO "samples" VALUES(33,1,'eval',2,0,'best','shape=s2,cls=large,n=4096','cls=large',120.00975,1.79533801869489836695e+09,'AB',0);
INSERT INTO "samples" VALUES(34,1,'eval',2,0,'cand','shape=s2,cls=large,n=4096','cls=large',113.617804,1.79533801869489836695e+09,'AB',0);
INSERT INTO "samples" VALUES(35,1,'eval',2,0,'best','shape=s3,cls=large,n=8192','cls=large',233.656367,1.79533801869489836695e+09,'AB',0);
INSERT INTO "samples" VALUES(36,1,'eval',2,0,'cand','shape=s3,cls=large,n=8192','cls=large',214.459346,1.79533801869489836695e+09,'AB',0);
INSERT INTO "samples" VALUES(37,1,'eval',3,0,'best','shape=s0,cls=small,n=128','cls=small',10.003632,1.79533802100099205969e+09,'BA',0);
INSERT INTO "samples" VALUES(38,1,'eval',3,0,'cand','shape=s0,cls=small,n=128','cls=small',9.38865,1.79533802100099205969e+09,'BA',0);
INSERT INTO "samples" VALUES(39,1,'eval',3,0,'best','shape=s1,cls=small,n=256','cls=small',13.670117,1.79533802100099205969e+09,'BA',0);
INSERT INTO "samples" VALUES(40,1,'eval',3,0,'cand','shape=s1,cls=small,n=256','cls=small',13.305771,1.79533802100099205969e+09,'BA',0);
INSERT INTO "samples" VALUES(41,1,'eval',3,0,'best','shape=s2,cls=large,n=4096','cls=large',120.664051,1.79533802100099205969e+09,'BA',0);
INSERT INTO "samples" VALUES(42,1,'eval',3,0,'cand','shape=s2,cls=large,n=4096','cls=large',113.399858,1.79533802100099205969e+09,'BA',0);
INSERT INTO "samples" VALUES(43,1,'eval',3,0,'best','shape=s3,cls=large,n=8192','cls=large',228.043275,1.79533802100099205969e+09,'BA',0);
INSERT INTO "samples" VALUES(44,1,'eval',3,0,'cand','shape=s3,cls=large,n=8192','cls=large',217.640349,1.79533802100099205969e+09,'BA',0);
INSERT INTO "samples" VALUES(45,1,'eval',4,0,'best','shape=s0,cls=small,n=128','cls=small',10.204864,1.79533802333023667337e+09,'AB',0);
INSERT INTO "samples" VALUES(46,1,'eval',4,0,'cand','shape=s0,cls=small,n=128','cls=small',9.519175,1.79533802333023667337e+09,'AB',0);
INSERT INTO "samples" VALUES(47,1,'eval',4,0,'best','shape=s1,cls=small,n=256','cls=small',14.091235,1.79533802333023667337e+09,'AB',0);
INSERT INTO "samples" VALUES(48,1,'eval',4,0,'cand','shape=s1,cls=small,n=256','cls=small',13.467925,1.79533802333023667337e+09,'AB',0);
INSERT INTO "samples" VALUES(49,1,'eval',4,0,'best','shape=s2,cls=large,n=4096','cls=large',121.029514,1.79533802333023667337e+09,'AB',0);
INSERT INTO "samples" VALUES(50,1,'eval',4,0,'cand','shape=s2,cls=large,n=4096','cls=large',114.949819,1.79533802333023667337e+09,'AB',0);
INSERT INTO "samples" VALUES(51,1,'eval',4,0,'best','shape=s3,cls=large,n=8192','cls=large',233.697303,1.79533802333023667337e+09,'AB',0);
INSERT INTO "samples" VALUES(52,1,'eval',4,0,'cand','shape=s3,cls=large,n=8192','cls=large',219.859437,1.79533802333023667337e+09,'AB',0);
INSERT INTO "samples" VALUES(53,2,'eval',0,0,'best','shape=s0,cls=small,n=128','cls=small',9.443822,1.79533803000417542462e+09,'AB',0);
INSERT INTO "samples" VALUES(54,2,'eval',0,0,'cand','shape=s0,cls=small,n=128','cls=small',8.98388,1.79533803000417542462e+09,'AB',0);
INSERT INTO "samples" VALUES(55,2,'eval',0,0,'best','shape=s1,cls=small,n=256','cls=small',13.314217,1.79533803000417542462e+09,'AB',0);
INSERT INTO "samples" VALUES(56,2,'eval',0,0,'cand','shape=s1,cls=small,n=256','cls=small',12.738767,1.79533803000417542462e+09,'AB',0);
INSERT INTO "samples" VALUES(57,2,'eval',0,0,'best','shape=s2,cls=large,n=4096','cls=large',114.162252,1.79533803000417542462e+09,'AB',0);
INSERT INTO "samples" VALUES(58,2,'eval',0,0,'cand','shape=s2,cls=large,n=4096','cls=large',118.751733,1.79533803000417542462e+09,'AB',0);
INSERT INTO "samples" VALUES(59,2,'eval',0,0,'best','shape=s3,cls=large,n=8192','cls=large',220.889056,1.79533803000417542462e+09,'AB',0);
INSERT INTO "samples" VALUES(60,2,'eval',0,0,'cand','shape=s3,cls=large,n=8192','cls=large',228.792731,1.79533803000417542462e+09,'AB',0);
INSERT INTO "samples" VALUES(61,2,'eval',1,0,'best','shape=s0,cls=small,n=128','cls=small',9.523864,1.79533803234342765808e+09,'BA',0);
INSERT INTO "samples" VALUES(62,2,'eval',1,0,'cand','shape=s0,cls=small,n=128','cls=small',8.970477,1.79533803234342765808e+09,'BA',0);
INSERT INTO "samples" VALUES(63,2,'eval',1,0,'best','shape=s1,cls=small,n=256','cls=small',13.206262,1.79533803234342765808e+09,'BA',0);
INSERT INTO "samples" VALUES(64,2,'eval',1,0,'cand','shape=s1,cls=small,n=256','cls=small',12.615101,1.79533803234342765808e+09,'BA',0);
INSERT INTO "samples" VALUES(65,2,'eval',1,0,'best','shape=s2,cls=large,n=4096','cls=large',111.499737,1.79533803234342765808e+09,'BA',0);
INSERT INTO "samples" VALUES(66,2,'eval',1,0,'cand','shape=s2,cls=large,n=4096','cls=large',117.543168,1.79533803234342765808e+09,'BA',0);
INSERT INTO "samples" VALUES(67,2,'eval',1,0,'best','shape=s3,cls=large,n=8192','cls=large',220.32224,1.79533803234342765808e+09,'BA',0);
INSERT INTO "samples" VALUES(68,2,'eval',1,0,'cand','shape=s3,cls=large,n=8192','cls=large',233.640859,1.79533803234342765808e+09,'BA',0);
INSERT INTO "samples" VALUES(69,2,'eval',2,0,'best','shape=s0,cls=small,n=128','cls=small',9.243228,1.79533803476416635512e+09,'AB',0);
INSERT INTO "samples" VALUES(70,2,'eval',2,0,'cand','shape=s0,cls=small,n=128','cls=small',8.987898,1.79533803476416635512e+09,'AB',0);
INSERT INTO "samples" VALUES(71,2,'eval',2,0,'best','shape=s1,cls=small,n=256','cls=small',13.169869,1.79533803476416635512e+09,'AB',0);
INSERT INTO "samples" VALUES(72,2,'eval',2,0,'cand','shape=s1,cls=small,n=256','cls=small',12.670824,1.79533803476416635512e+09,'AB',0);
INSERT INTO "samples" VALUES(73,2,'eval',2,0,'best','shape=s2,cls=large,n=4096','cls=large',114.677482,1.79533803476416635512e+09,'AB',0);
INSERT INTO "samples" VALUES(74,2,'eval',2,0,'cand','shape=s2,cls=large,n=4096','cls=large',119.420977,1.79533803476416635512e+09,'AB',0);
INSERT INTO "samples" VALUES(75,2,'eval',2,0,'best','shape=s3,cls=large,n=8192','cls=large',220.031207,1.79533803476416635512e+09,'AB',0);
INSERT INTO "samples" VALUES(76,2,'eval',2,0,'cand','shape=s3,cls=large,n=8192','cls=large',227.410534,1.79533803476416635512e+09,'AB',0);
INSERT INTO "samples" VALUES(77,2,'eval',3,0,'best','shape=s0,cls=small,n=128','cls=small',9.425045,1.79533803715089583397e+09,'BA',0);
INSERT INTO "samples" VALUES(78,2,'eval',3,0,'cand','shape=s0,cls=small,n=128','cls=small',8.927602,1.79533803715089583397e+09,'BA',0);
INSERT INTO "samples" VALUES(79,2,'eval',3,0,'best','shape=s1,cls=small,n=256','cls=small',13.178282,1.79533803715089583397e+09,'BA',0);
INSERT INTO "samples" VALUES(80,2,'eval',3,0,'cand','shape=s1,cls=small,n=256','cls=small',12.33933,1.79533803715089583397e+09,'BA',0);
INSERT INTO "samples" VALUES(81,2,'eval',3,0,'best','shape=s2,cls=large,n=4096','cls=large',112.850649,1.79533803715089583397e+09,'BA',0);
INSERT INTO "samples" VALUES(82,2,'eval',3,0,'cand','shape=s2,cls=large,n=4096','cls=large',118.170524,1.79533803715089583397e+09,'BA',0);
INSERT INTO "samples" VALUES(83,2,'eval',3,0,'best','shape=s3,cls=large,n=8192','cls=large',215.652644,1.79533803715089583397e+09,'BA',0);
INSERT INTO "samples" VALUES(84,2,'eval',3,0,'cand','shape=s3,cls=large,n=8192','cls=large',226.56269,1.79533803715089583397e+09,'BA',0);
INSERT INTO "samples" VALUES(85,2,'eval',4,0,'best','shape=s0,cls=small,n=128','cls=small',9.495089,1.79533803943299722673e+09,'AB',0);
INSERT INTO "samples" VALUES(86,2,'eval',4,0,'cand','shape=s0,cls=small,n=128','cls=small',8.913842,1.79533803943299722673e+09,'AB',0);
INSERT INTO "samples" VALUES(87,2,'eval',4,0,'best','shape=s1,cls=small,n=256','cls=small',13.32319,1.79533803943299722673e+09,'AB',0);
INSERT INTO "samples" VALUES(88,2,'eval',4,0,'cand','shape=s1,cls=small,n=256','cls=small',12.649871,1.79533803943299722673e+09,'AB',0);
INSERT INTO "samples" VALUES(89,2,'eval',4,0,'best','shape=s2,cls=large,n=4096','cls=large',113.799381,1.79533803943299722673e+09,'AB',0);
INSERT INTO "samples" VALUES(90,2,'eval',4,0,'cand','shape=s2,cls=large,n=4096','cls=large',121.54567,1.79533803943299722673e+09,'AB',0);
INSERT INTO "samples" VALUES(91,2,'eval',4,0,'best','shape=s3,cls=large,n=8192','cls=large',218.670141,1.79533803943299722673e+09,'AB',0);
INSERT INTO "samples" VALUES(92,2,'eval',4,0,'cand','shape=s3,cls=large,n=8192','cls=large',231.206257,1.79533803943299722673e+09,'AB',0);
INSERT INTO "samples" VALUES(93,4,'eval',0,0,'best','shape=s0,cls=small,n=128','cls=small',9.604216,1.79533805477015042306e+09,'AB',0);
INSERT INTO "samples" VALUES(94,4,'eval',0,0,'cand','shape=s0,cls=small,n=128','cls=small',9.070905,1.79533805477015042306e+09,'AB',0);
INSERT INTO "samples" VALUES(95,4,'eval',0,0,'best','shape=s1,cls=small,n=256','cls=small',13.170657,1.79533805477015042306e+09,'AB',0);
INSERT INTO "samples" VALUES(96,4,'eval',0,0,'cand','shape=s1,cls=small,n=256','cls=small',12.724657,1.79533805477015042306e+09,'AB',0);
INSERT INTO "samples" VALUES(97,4,'eval',0,0,'best','shape=s2,cls=large,n=4096','cls=large',113.417869,1.79533805477015042306e+09,'AB',0);
INSERT INTO "samples" VALUES(98,4,'eval',0,0,'cand','shape=s2,cls=large,n=4096','cls=large',107.694912,1.79533805477015042306e+09,'AB',0);
INSERT INTO "samples" VALUES(99,4,'eval',0,0,'best','shape=s3,cls=large,n=8192','cls=large',222.02633,1.79533805477015042306e+09,'AB',0);
INSERT INTO "samples" VALUES(100,4,'eval',0,0,'cand','shape=s3,cls=large,n=8192','cls=large',208.017636,1.79533805477015042306e+09,'AB',0);
INSERT INTO "samples" VALUES(101,4,'eval',1,0,'best','shape=s0,cls=small,n=128','cls=small',9.440461,1.79533805716896176338e+09,'BA',0);
INSERT INTO "samples" VALUES(102,4,'eval',1,0,'cand','shape=s0,cls=small,n=128','cls=small',9.008581,1.79533805716896176338e+09,'BA',0);
INSERT INTO "samples" VALUES(103,4,'eval',1,0,'best','shape=s1,cls=small,n=256','cls=small',13.261612,1.79533805716896176338e+09,'BA',0);
INSERT INTO "samples" VALUES(104,4,'eval',1,0,'cand','shape=s1,cls=small,n=256','cls=small',12.658462,1.79533805716896176338e+09,'BA',0);
INSERT INTO "samples" VALUES(105,4,'eval',1,0,'best','shape=s2,cls=large,n=4096','cls=large',115.503861,1.79533805716896176338e+09,'BA',0);
INSERT INTO "samples" VALUES(106,4,'eval',1,0,'cand','shape=s2,cls=large,n=4096','cls=large',105.816387,1.79533805716896176338e+09,'BA',0);
INSERT INTO "samples" VALUES(107,4,'eval',1,0,'best','shape=s3,cls=large,n=8192','cls=large',215.882216,1.79533805716896176338e+09,'BA',0);
INSERT INTO "samples" VALUES(108,4,'eval',1,0,'cand','shape=s3,cls=large,n=8192','cls=large',210.036759,1.79533805716896176338e+09,'BA',0);
INSERT INTO "samples" VALUES(109,4,'eval',2,0,'best','shape=s0,cls=small,n=128','cls=small',9.54481,1.79533805956522202491e+09,'AB',0);
INSERT INTO "samples" VALUES(110,4,'eval',2,0,'cand','shape=s0,cls=small,n=128','cls=small',8.93643,1.79533805956522202491e+09,'AB',0);
INSERT INTO "samples" VALUES(111,4,'eval',2,0,'best','shape=s1,cls=small,n=256','cls=small',13.368215,1.79533805956522202491e+09,'AB',0);
INSERT INTO "samples" VALUES(112,4,'eval',2,0,'cand','shape=s1,cls=small,n=256','cls=small',12.676562,1.79533805956522202491e+09,'AB',0);
INSERT INTO "samples" VALUES(113,4,'eval',2,0,'best','shape=s2,cls=large,n=4096','cls=large',113.519279,1.79533805956522202491e+09,'AB',0);
INSERT INTO "samples" VALUES(114,4,'eval',2,0,'cand','shape=s2,cls=large,n=4096','cls=large',109.589199,1.79533805956522202491e+09,'AB',0);
INSERT INTO "samples" VALUES(115,4,'eval',2,0,'best','shape=s3,cls=large,n=8192','cls=large',216.911493,1.79533805956522202491e+09,'AB',0);
INSERT INTO "samples" VALUES(116,4,'eval',2,0,'cand','shape=s3,cls=large,n=8192','cls=large',206.955772,1.79533805956522202491e+09,'AB',0);
INSERT INTO "samples" VALUES(117,4,'eval',3,0,'best','shape=s0,cls=small,n=128','cls=small',9.378847,1.79533806213166832925e+09,'BA',0);
INSERT INTO "samples" VALUES(118,4,'eval',3,0,'cand','shape=s0,cls=small,n=128','cls=small',9.307872,1.79533806213166832925e+09,'BA',0);
INSERT INTO "samples" VALUES(119,4,'eval',3,0,'best','shape=s1,cls=small,n=256','cls=small',13.433357,1.79533806213166832925e+09,'BA',0);
INSERT INTO "samples" VALUES(120,4,'eval',3,0,'cand','shape=s1,cls=small,n=256','cls=small',12.594805,1.79533806213166832925e+09,'BA',0);
INSERT INTO "samples" VALUES(121,4,'eval',3,0,'best','shape=s2,cls=large,n=4096','cls=large',112.683959,1.79533806213166832925e+09,'BA',0);
INSERT INTO "samples" VALUES(122,4,'eval',3,0,'cand','shape=s2,cls=large,n=4096','cls=large',110.788791,1.79533806213166832925e+09,'BA',0);
INSERT INTO "samples" VALUES(123,4,'eval',3,0,'best','shape=s3,cls=large,n=8192','cls=large',217.937528,1.79533806213166832925e+09,'BA',0);
INSERT INTO "samples" VALUES(124,4,'eval',3,0,'cand','shape=s3,cls=large,n=8192','cls=large',205.824195,1.79533806213166832925e+09,'BA',0);
INSERT INTO "samples" VALUES(125,4,'eval',4,0,'best','shape=s0,cls=small,n=128','cls=small',9.432416,1.79533806474593949321e+09,'AB',0);
INSERT INTO "samples" VALUES(126,4,'eval',4,0,'cand','shape=s0,cls=small,n=128','cls=small',9.031715,1.79533806474593949321e+09,'AB',0);
INSERT INTO "samples" VALUES(127,4,'eval',4,0,'best','shape=s1,cls=small,n=256','cls=small',13.366315,1.79533806474593949321e+09,'AB',0);
INSERT INTO "samples" VALUES(128,4,'eval',4,0,'cand','shape=s1,cls=small,n=256','cls=small',12.539914,1.79533806474593949321e+09,'AB',0);
INSERT INTO "samples" VALUES(129,4,'eval',4,0,'best','shape=s2,cls=large,n=4096','cls=large',115.708099,1.79533806474593949321e+09,'AB',0);
INSERT INTO "samples" VALUES(130,4,'eval',4,0,'cand','shape=s2,cls=large,n=4096','cls=large',108.249478,1.79533806474593949321e+09,'AB',0);
INSERT INTO "samples" VALUES(131,4,'eval',4,0,'best','shape=s3,cls=large,n=8192','cls=large',213.126012,1.79533806474593949321e+09,'AB',0);
INSERT INTO "samples" VALUES(132,4,'eval',4,0,'cand','shape=s3,cls=large,n=8192','cls=large',205.297955,1.79533806474593949321e+09,'AB',0);
INSERT INTO "samples" VALUES(133,6,'eval',0,0,'best','shape=s0,cls=small,n=128','cls=small',9.008395,1.79533807640074324603e+09,'AB',0);
INSERT INTO "samples" VALUES(134,6,'eval',0,0,'cand','shape=s0,cls=small,n=128','cls=small',9.674801,1.79533807640074324603e+09,'AB',0);
INSERT INTO "samples" VALUES(135,6,'eval',0,0,'best','shape=s1,cls=small,n=256','cls=small',12.915054,1.79533807640074324603e+09,'AB',0);
INSERT INTO "samples" VALUES(136,6,'eval',0,0,'cand','shape=s1,cls=small,n=256','cls=small',13.079272,1.79533807640074324603e+09,'AB',0);
INSERT INTO "samples" VALUES(137,6,'eval',0,0,'best','shape=s2,cls=large,n=4096','cls=large',107.215253,1.79533807640074324603e+09,'AB',0);
INSERT INTO "samples" VALUES(138,6,'eval',0,0,'cand','shape=s2,cls=large,n=4096','cls=large',113.572702,1.79533807640074324603e+09,'AB',0);
INSERT INTO "samples" VALUES(139,6,'eval',0,0,'best','shape=s3,cls=large,n=8192','cls=large',207.089354,1.79533807640074324603e+09,'AB',0);
INSERT INTO "samples" VALUES(140,6,'eval',0,0,'cand','shape=s3,cls=large,n=8192','cls=large',215.589018,1.79533807640074324603e+09,'AB',0);
INSERT INTO "samples" VALUES(141,6,'eval',1,0,'best','shape=s0,cls=small,n=128','cls=small',8.892458,1.79533807885349822042e+09,'BA',0);
INSERT INTO "samples" VALUES(142,6,'eval',1,0,'cand','shape=s0,cls=small,n=128','cls=small',9.595196,1.79533807885349822042e+09,'BA',0);
INSERT INTO "samples" VALUES(143,6,'eval',1,0,'best','shape=s1,cls=small,n=256','cls=small',12.634352,1.79533807885349822042e+09,'BA',0);
INSERT INTO "samples" VALUES(144,6,'eval',1,0,'cand','shape=s1,cls=small,n=256','cls=small',13.301243,1.79533807885349822042e+09,'BA',0);
INSERT INTO "samples" VALUES(145,6,'eval',1,0,'best','shape=s2,cls=large,n=4096','cls=large',108.564114,1.79533807885349822042e+09,'BA',0);
INSERT INTO "samples" VALUES(146,6,'eval',1,0,'cand','shape=s2,cls=large,n=4096','cls=large',115.245942,1.79533807885349822042e+09,'BA',0);
INSERT INTO "samples" VALUES(147,6,'eval',1,0,'best','shape=s3,cls=large,n=8192','cls=large',209.807037,1.79533807885349822042e+09,'BA',0);
INSERT INTO "samples" VALUES(148,6,'eval',1,0,'cand','shape=s3,cls=large,n=8192','cls=large',218.239497,1.79533807885349822042e+09,'BA',0);
INSERT INTO "samples" VALUES(149,6,'eval',2,0,'best','shape=s0,cls=small,n=128','cls=small',9.11246,1.79533808130694317812e+09,'AB',0);
INSERT INTO "samples" VALUES(150,6,'eval',2,0,'cand','shape=s0,cls=small,n=128','cls=small',9.355559,1.79533808130694317812e+09,'AB',0);
INSERT INTO "samples" VALUES(151,6,'eval',2,0,'best','shape=s1,cls=small,n=256','cls=small',12.709961,1.79533808130694317812e+09,'AB',0);
INSERT INTO "samples" VALUES(152,6,'eval',2,0,'cand','shape=s1,cls=small,n=256','cls=small',13.494668,1.79533808130694317812e+09,'AB',0);
INSERT INTO "samples" VALUES(153,6,'eval',2,0,'best','shape=s2,cls=large,n=4096','cls=large',109.613003,1.79533808130694317812e+09,'AB',0);
INSERT INTO "samples" VALUES(154,6,'eval',2,0,'cand','shape=s2,cls=large,n=4096','cls=large',114.020313,1.79533808130694317812e+09,'AB',0);
INSERT INTO "samples" VALUES(155,6,'eval',2,0,'best','shape=s3,cls=large,n=8192','cls=large',209.367762,1.79533808130694317812e+09,'AB',0);
INSERT INTO "samples" VALUES(156,6,'eval',2,0,'cand','shape=s3,cls=large,n=8192','cls=large',215.521934,1.79533808130694317812e+09,'AB',0);
INSERT INTO "samples" VALUES(157,6,'eval',3,0,'best','shape=s0,cls=small,n=128','cls=small',9.257434,1.79533808390088891982e+09,'BA',0);
INSERT INTO "samples" VALUES(158,6,'eval',3,0,'cand','shape=s0,cls=small,n=128','cls=small',9.494203,1.79533808390088891982e+09,'BA',0);
INSERT INTO "samples" VALUES(159,6,'eval',3,0,'best','shape=s1,cls=small,n=256','cls=small',12.539161,1.79533808390088891982e+09,'BA',0);
INSERT INTO "samples" VALUES(160,6,'eval',3,0,'cand','shape=s1,cls=small,n=256','cls=small',12.965856,1.79533808390088891982e+09,'BA',0);
INSERT INTO "samples" VALUES(161,6,'eval',3,0,'best','shape=s2,cls=large,n=4096','cls=large',109.957802,1.79533808390088891982e+09,'BA',0);
INSERT INTO "samples" VALUES(162,6,'eval',3,0,'cand','shape=s2,cls=large,n=4096','cls=large',115.893682,1.79533808390088891982e+09,'BA',0);
INSERT INTO "samples" VALUES(163,6,'eval',3,0,'best','shape=s3,cls=large,n=8192','cls=large',205.996287,1.79533808390088891982e+09,'BA',0);
INSERT INTO "samples" VALUES(164,6,'eval',3,0,'cand','shape=s3,cls=large,n=8192','cls=large',216.965227,1.79533808390088891982e+09,'BA',0);
INSERT INTO "samples" VALUES(165,6,'eval',4,0,'best','shape=s0,cls=small,n=128','cls=small',9.044078,1.79533808643310356135e+09,'AB',0);
INSERT INTO "samples" VALUES(166,6,'eval',4,0,'cand','shape=s0,cls=small,n=128','cls=small',9.371235,1.79533808643310356135e+09,'AB',0);
INSERT INTO "samples" VALUES(167,6,'eval',4,0,'best','shape=s1,cls=small,n=256','cls=small',12.739647,1.79533808643310356135e+09,'AB',0);
INSERT INTO "samples" VALUES(168,6,'eval',4,0,'cand','shape=s1,cls=small,n=256','cls=small',13.416067,1.79533808643310356135e+09,'AB',0);
INSERT INTO "samples" VALUES(169,6,'eval',4,0,'best','shape=s2,cls=large,n=4096','cls=large',107.972266,1.79533808643310356135e+09,'AB',0);
INSERT INTO "samples" VALUES(170,6,'eval',4,0,'cand','shape=s2,cls=large,n=4096','cls=large',113.683461,1.79533808643310356135e+09,'AB',0);
INSERT INTO "samples" VALUES(171,6,'eval',4,0,'best','shape=s3,cls=large,n=8192','cls=large',209.040578,1.79533808643310356135e+09,'AB',0);
INSERT INTO "samples" VALUES(172,6,'eval',4,0,'cand','shape=s3,cls=large,n=8192','cls=large',216.535364,1.79533808643310356135e+09,'AB',0);
INSERT INTO "samples" VALUES(173,7,'eval',0,0,'best','shape=s0,cls=small,n=128','cls=small',9.127889,1.79533809376597690583e+09,'AB',0);
INSERT INTO "samples" VALUES(174,7,'eval',0,0,'cand','shape=s0,cls=small,n=128','cls=small',9.624593,1.79533809376597690583e+09,'AB',0);
INSERT INTO "samples" VALUES(175,7,'eval',0,0,'best','shape=s1,cls=small,n=256','cls=small',12.741408,1.79533809376597690583e+09,'AB',0);
INSERT INTO "samples" VALUES(176,7,'eval',0,0,'cand','shape=s1,cls=small,n=256','cls=small',13.506115,1.79533809376597690583e+09,'AB',0);
INSERT INTO "samples" VALUES(177,7,'eval',0,0,'best','shape=s2,cls=large,n=4096','cls=large',110.902258,1.79533809376597690583e+09,'AB',0);
INSERT INTO "samples" VALUES(178,7,'eval',0,0,'cand','shape=s2,cls=large,n=4096','cls=large',114.286458,1.79533809376597690583e+09,'AB',0);
INSERT INTO "samples" VALUES(179,7,'eval',0,0,'best','shape=s3,cls=large,n=8192','cls=large',209.997934,1.79533809376597690583e+09,'AB',0);
INSERT INTO "samples" VALUES(180,7,'eval',0,0,'cand','shape=s3,cls=large,n=8192','cls=large',218.93628,1.79533809376597690583e+09,'AB',0);
INSERT INTO "samples" VALUES(181,7,'eval',1,0,'best','shape=s0,cls=small,n=128','cls=small',8.94563,1.79533809629611921304e+09,'BA',0);
INSERT INTO "samples" VALUES(182,7,'eval',1,0,'cand','shape=s0,cls=small,n=128','cls=small',9.535263,1.79533809629611921304e+09,'BA',0);
INSERT INTO "samples" VALUES(183,7,'eval',1,0,'best','shape=s1,cls=small,n=256','cls=small',12.55326,1.79533809629611921304e+09,'BA',0);
INSERT INTO "samples" VALUES(184,7,'eval',1,0,'cand','shape=s1,cls=small,n=256','cls=small',13.407115,1.79533809629611921304e+09,'BA',0);
INSERT INTO "samples" VALUES(185,7,'eval',1,0,'best','shape=s2,cls=large,n=4096','cls=large',107.048339,1.79533809629611921304e+09,'BA',0);
INSERT INTO "samples" VALUES(186,7,'eval',1,0,'cand','shape=s2,cls=large,n=4096','cls=large',114.143713,1.79533809629611921304e+09,'BA',0);
INSERT INTO "samples" VALUES(187,7,'eval',1,0,'best','shape=s3,cls=large,n=8192','cls=large',203.135689,1.79533809629611921304e+09,'BA',0);
INSERT INTO "samples" VALUES(188,7,'eval',1,0,'cand','shape=s3,cls=large,n=8192','cls=large',215.466799,1.79533809629611921304e+09,'BA',0);
INSERT INTO "samples" VALUES(189,7,'eval',2,0,'best','shape=s0,cls=small,n=128','cls=small',9.00407,1.79533809875077509884e+09,'AB',0);
INSERT INTO "samples" VALUES(190,7,'eval',2,0,'cand','shape=s0,cls=small,n=128','cls=small',9.418226,1.79533809875077509884e+09,'AB',0);
INSERT INTO "samples" VALUES(191,7,'eval',2,0,'best','shape=s1,cls=small,n=256','cls=small',12.754281,1.79533809875077509884e+09,'AB',0);
INSERT INTO "samples" VALUES(192,7,'eval',2,0,'cand','shape=s1,cls=small,n=256','cls=small',13.285436,1.79533809875077509884e+09,'AB',0);
INSERT INTO "samples" VALUES(193,7,'eval',2,0,'best','shape=s2,cls=large,n=4096','cls=large',107.650036,1.79533809875077509884e+09,'AB',0);
INSERT INTO "samples" VALUES(194,7,'eval',2,0,'cand','shape=s2,cls=large,n=4096','cls=large',114.968228,1.79533809875077509884e+09,'AB',0);
INSERT INTO "samples" VALUES(195,7,'eval',2,0,'best','shape=s3,cls=large,n=8192','cls=large',208.389819,1.79533809875077509884e+09,'AB',0);
INSERT INTO "samples" VALUES(196,7,'eval',2,0,'cand','shape=s3,cls=large,n=8192','cls=large',215.347436,1.79533809875077509884e+09,'AB',0);
INSERT INTO "samples" VALUES(197,7,'eval',3,0,'best','shape=s0,cls=small,n=128','cls=small',8.95175,1.79533810120479679107e+09,'BA',0);
INSERT INTO "samples" VALUES(198,7,'eval',3,0,'cand','shape=s0,cls=small,n=128','cls=small',9.318562,1.79533810120479679107e+09,'BA',0);
INSERT INTO "samples" VALUES(199,7,'eval',3,0,'best','shape=s1,cls=small,n=256','cls=small',12.470479,1.79533810120479679107e+09,'BA',0);
INSERT INTO "samples" VALUES(200,7,'eval',3,0,'cand','shape=s1,cls=small,n=256','cls=small',13.130125,1.79533810120479679107e+09,'BA',0);
INSERT INTO "samples" VALUES(201,7,'eval',3,0,'best','shape=s2,cls=large,n=4096','cls=large',108.336515,1.79533810120479679107e+09,'BA',0);
INSERT INTO "samples" VALUES(202,7,'eval',3,0,'cand','shape=s2,cls=large,n=4096','cls=large',112.926439,1.79533810120479679107e+09,'BA',0);
INSERT INTO "samples" VALUES(203,7,'eval',3,0,'best','shape=s3,cls=large,n=8192','cls=large',210.715035,1.79533810120479679107e+09,'BA',0);
INSERT INTO "samples" VALUES(204,7,'eval',3,0,'cand','shape=s3,cls=large,n=8192','cls=large',218.126761,1.79533810120479679107e+09,'BA',0);
INSERT INTO "samples" VALUES(205,7,'eval',4,0,'best','shape=s0,cls=small,n=128','cls=small',9.038991,1.79533810372661590572e+09,'AB',0);
INSERT INTO "samples" VALUES(206,7,'eval',4,0,'cand','shape=s0,cls=small,n=128','cls=small',9.568152,1.79533810372661590572e+09,'AB',0);
INSERT INTO "samples" VALUES(207,7,'eval',4,0,'best','shape=s1,cls=small,n=256','cls=small',12.447556,1.79533810372661590572e+09,'AB',0);
INSERT INTO "samples" VALUES(208,7,'eval',4,0,'cand','shape=s1,cls=small,n=256','cls=small',13.240033,1.79533810372661590572e+09,'AB',0);
INSERT INTO "samples" VALUES(209,7,'eval',4,0,'best','shape=s2,cls=large,n=4096','cls=large',109.236368,1.79533810372661590572e+09,'AB',0);
INSERT INTO "samples" VALUES(210,7,'eval',4,0,'cand','shape=s2,cls=large,n=4096','cls=large',113.975997,1.79533810372661590572e+09,'AB',0);
INSERT INTO "samples" VALUES(211,7,'eval',4,0,'best','shape=s3,cls=large,n=8192','cls=large',205.4109,1.79533810372661590572e+09,'AB',0);
INSERT INTO "samples" VALUES(212,7,'eval',4,0,'cand','shape=s3,cls=large,n=8192','cls=large',218.480715,1.79533810372661590572e+09,'AB',0);
INSERT INTO "samples" VALUES(213,8,'eval',0,0,'best','shape=s0,cls=small,n=128','cls=small',9.003267,1.79533811066813564299e+09,'AB',0);
INSERT INTO "samples" VALUES(214,8,'eval',0,0,'cand','shape=s0,cls=small,n=128','cls=small',8.956682,1.79533811066813564299e+09,'AB',0);
INSERT INTO "samples" VALUES(215,8,'eval',0,0,'best','shape=s1,cls=small,n=256','cls=small',12.59164,1.79533811066813564299e+09,'AB',0);
INSERT INTO "samples" VALUES(216,8,'eval',0,0,'cand','shape=s1,cls=small,n=256','cls=small',12.473281,1.79533811066813564299e+09,'AB',0);
INSERT INTO "samples" VALUES(217,8,'eval',0,0,'best','shape=s2,cls=large,n=4096','cls=large',107.550621,1.79533811066813564299e+09,'AB',0);
INSERT INTO "samples" VALUES(218,8,'eval',0,0,'cand','shape=s2,cls=large,n=4096','cls=large',110.023751,1.79533811066813564299e+09,'AB',0);
INSERT INTO "samples" VALUES(219,8,'eval',0,0,'best','shape=s3,cls=large,n=8192','cls=large',205.697268,1.79533811066813564299e+09,'AB',0);
INSERT INTO "samples" VALUES(220,8,'eval',0,0,'cand','shape=s3,cls=large,n=8192','cls=large',208.386948,1.79533811066813564299e+09,'AB',0);
INSERT INTO "samples" VALUES(221,8,'eval',1,0,'best','shape=s0,cls=small,n=128','cls=small',9.006372,1.79533811313938879965e+09,'BA',0);
INSERT INTO "samples" VALUES(222,8,'eval',1,0,'cand','shape=s0,cls=small,n=128','cls=small',8.886624,1.79533811313938879965e+09,'BA',0);
INSERT INTO "samples" VALUES(223,8,'eval',1,0,'best','shape=s1,cls=small,n=256','cls=small',12.759191,1.79533811313938879965e+09,'BA',0);
INSERT INTO "samples" VALUES(224,8,'eval',1,0,'cand','shape=s1,cls=small,n=256','cls=small',12.703539,1.79533811313938879965e+09,'BA',0);
INSERT INTO "samples" VALUES(225,8,'eval',1,0,'best','shape=s2,cls=large,n=4096','cls=large',108.697501,1.79533811313938879965e+09,'BA',0);
INSERT INTO "samples" VALUES(226,8,'eval',1,0,'cand','shape=s2,cls=large,n=4096','cls=large',107.782828,1.79533811313938879965e+09,'BA',0);
INSERT INTO "samples" VALUES(227,8,'eval',1,0,'best','shape=s3,cls=large,n=8192','cls=large',211.17155,1.79533811313938879965e+09,'BA',0);
INSERT INTO "samples" VALUES(228,8,'eval',1,0,'cand','shape=s3,cls=large,n=8192','cls=large',207.883205,1.79533811313938879965e+09,'BA',0);
INSERT INTO "samples" VALUES(229,8,'eval',2,0,'best','shape=s0,cls=small,n=128','cls=small',9.174768,1.79533811557752227784e+09,'AB',0);
INSERT INTO "samples" VALUES(230,8,'eval',2,0,'cand','shape=s0,cls=small,n=128','cls=small',9.067983,1.79533811557752227784e+09,'AB',0);
INSERT INTO "samples" VALUES(231,8,'eval',2,0,'best','shape=s1,cls=small,n=256','cls=small',12.740233,1.79533811557752227784e+09,'AB',0);
INSERT INTO "samples" VALUES(232,8,'eval',2,0,'cand','shape=s1,cls=small,n=256','cls=small',12.502859,1.79533811557752227784e+09,'AB',0);
INSERT INTO "samples" VALUES(233,8,'eval',2,0,'best','shape=s2,cls=large,n=4096','cls=large',106.53711,1.79533811557752227784e+09,'AB',0);
INSERT INTO "samples" VALUES(234,8,'eval',2,0,'cand','shape=s2,cls=large,n=4096','cls=large',108.004048,1.79533811557752227784e+09,'AB',0);
INSERT INTO "samples" VALUES(235,8,'eval',2,0,'best','shape=s3,cls=large,n=8192','cls=large',210.083576,1.79533811557752227784e+09,'AB',0);
INSERT INTO "samples" VALUES(236,8,'eval',2,0,'cand','shape=s3,cls=large,n=8192','cls=large',205.784336,1.79533811557752227784e+09,'AB',0);
INSERT INTO "samples" VALUES(237,8,'eval',3,0,'best','shape=s0,cls=small,n=128','cls=small',9.038611,1.7953381179374136925e+09,'BA',0);
INSERT INTO "samples" VALUES(238,8,'eval',3,0,'cand','shape=s0,cls=small,n=128','cls=small',9.054491,1.7953381179374136925e+09,'BA',0);
INSERT INTO "samples" VALUES(239,8,'eval',3,0,'best','shape=s1,cls=small,n=256','cls=small',12.708675,1.7953381179374136925e+09,'BA',0);
INSERT INTO "samples" VALUES(240,8,'eval',3,0,'cand','shape=s1,cls=small,n=256','cls=small',12.376022,1.7953381179374136925e+09,'BA',0);
INSERT INTO "samples" VALUES(241,8,'eval',3,0,'best','shape=s2,cls=large,n=4096','cls=large',107.720041,1.7953381179374136925e+09,'BA',0);
INSERT INTO "samples" VALUES(242,8,'eval',3,0,'cand','shape=s2,cls=large,n=4096','cls=large',107.67933,1.7953381179374136925e+09,'BA',0);
INSERT INTO "samples" VALUES(243,8,'eval',3,0,'best','shape=s3,cls=large,n=8192','cls=large',205.935871,1.7953381179374136925e+09,'BA',0);
INSERT INTO "samples" VALUES(244,8,'eval',3,0,'cand','shape=s3,cls=large,n=8192','cls=large',206.869709,1.7953381179374136925e+09,'BA',0);
INSERT INTO "samples" VALUES(245,8,'eval',4,0,'best','shape=s0,cls=small,n=128','cls=small',8.960307,1.7953381203786921501e+09,'AB',0);
INSERT INTO "samples" VALUES(246,8,'eval',4,0,'cand','shape=s0,cls=small,n=128','cls=small',8.971312,1.7953381203786921501e+09,'AB',0);
INSERT INTO "samples" VALUES(247,8,'eval',4,0,'best','shape=s1,cls=small,n=256','cls=small',12.556078,1.7953381203786921501e+09,'AB',0);
INSERT INTO "samples" VALUES(248,8,'eval',4,0,'cand','shape=s1,cls=small,n=256','cls=small',12.529469,1.7953381203786921501e+09,'AB',0);
INSERT INTO "samples" VALUES(249,8,'eval',4,0,'best','shape=s2,cls=large,n=4096','cls=large',108.163176,1.7953381203786921501e+09,'AB',0);
INSERT INTO "samples" VALUES(250,8,'eval',4,0,'cand','shape=s2,cls=large,n=4096','cls=large',108.246301,1.7953381203786921501e+09,'AB',0);
INSERT INTO "samples" VALUES(251,8,'eval',4,0,'best','shape=s3,cls=large,n=8192','cls=large',205.637884,1.7953381203786921501e+09,'AB',0);
INSERT INTO "samples" VALUES(252,8,'eval',4,0,'cand','shape=s3,cls=large,n=8192','cls=large',206.242068,1.7953381203786921501e+09,'AB',0);
INSERT INTO "samples" VALUES(253,8,'eval',5,0,'best','shape=s0,cls=small,n=128','cls=small',8.903727,1.79533812280555891993e+09,'BA',0);
INSERT INTO "samples" VALUES(254,8,'eval',5,0,'cand','shape=s0,cls=small,n=128','cls=small',8.952924,1.79533812280555891993e+09,'BA',0);
INSERT INTO "samples" VALUES(255,8,'eval',5,0,'best','shape=s1,cls=small,n=256','cls=small',12.808576,1.79533812280555891993e+09,'BA',0);
INSERT INTO "samples" VALUES(256,8,'eval',5,0,'cand','shape=s1,cls=small,n=256','cls=small',12.417194,1.79533812280555891993e+09,'BA',0);
INSERT INTO "samples" VALUES(257,8,'eval',5,0,'best','shape=s2,cls=large,n=4096','cls=large',108.56325,1.79533812280555891993e+09,'BA',0);
INSERT INTO "samples" VALUES(258,8,'eval',5,0,'cand','shape=s2,cls=large,n=4096','cls=large',109.402171,1.79533812280555891993e+09,'BA',0);
INSERT INTO "samples" VALUES(259,8,'eval',5,0,'best','shape=s3,cls=large,n=8192','cls=large',204.25856,1.79533812280555891993e+09,'BA',0);
INSERT INTO "samples" VALUES(260,8,'eval',5,0,'cand','shape=s3,cls=large,n=8192','cls=large',206.425743,1.79533812280555891993e+09,'BA',0);
INSERT INTO "samples" VALUES(261,8,'eval',6,0,'best','shape=s0,cls=small,n=128','cls=small',9.026917,1.79533812521913146978e+09,'AB',0);
INSERT INTO "samples" VALUES(262,8,'eval',6,0,'cand','shape=s0,cls=small,n=128','cls=small',8.997191,1.79533812521913146978e+09,'AB',0);
INSERT INTO "samples" VALUES(263,8,'eval',6,0,'best','shape=s1,cls=small,n=256','cls=small',12.799436,1.79533812521913146978e+09,'AB',0);
INSERT INTO "samples" VALUES(264,8,'eval',6,0,'cand','shape=s1,cls=small,n=256','cls=small',12.711362,1.79533812521913146978e+09,'AB',0);
INSERT INTO "samples" VALUES(265,8,'eval',6,0,'best','shape=s2,cls=large,n=4096','cls=large',107.463915,1.79533812521913146978e+09,'AB',0);
INSERT INTO "samples" VALUES(266,8,'eval',6,0,'cand','shape=s2,cls=large,n=4096','cls=large',107.018881,1.79533812521913146978e+09,'AB',0);
INSERT INTO "samples" VALUES(267,8,'eval',6,0,'best','shape=s3,cls=large,n=8192','cls=large',202.677573,1.79533812521913146978e+09,'AB',0);
INSERT INTO "samples" VALUES(268,8,'eval',6,0,'cand','shape=s3,cls=large,n=8192','cls=large',206.153041,1.79533812521913146978e+09,'AB',0);
INSERT INTO "samples" VALUES(269,8,'eval',7,0,'best','shape=s0,cls=small,n=128','cls=small',9.062824,1.79533812756046962742e+09,'BA',0);
INSERT INTO "samples" VALUES(270,8,'eval',7,0,'cand','shape=s0,cls=small,n=128','cls=small',8.882766,1.79533812756046962742e+09,'BA',0);
INSERT INTO "samples" VALUES(271,8,'eval',7,0,'best','shape=s1,cls=small,n=256','cls=small',12.661611,1.79533812756046962742e+09,'BA',0);
INSERT INTO "samples" VALUES(272,8,'eval',7,0,'cand','shape=s1,cls=small,n=256','cls=small',12.6013,1.79533812756046962742e+09,'BA',0);
INSERT INTO "samples" VALUES(273,8,'eval',7,0,'best','shape=s2,cls=large,n=4096','cls=large',110.502067,1.79533812756046962742e+09,'BA',0);
INSERT INTO "samples" VALUES(274,8,'eval',7,0,'cand','shape=s2,cls=large,n=4096','cls=large',107.934916,1.79533812756046962742e+09,'BA',0);
INSERT INTO "samples" VALUES(275,8,'eval',7,0,'best','shape=s3,cls=large,n=8192','cls=large',213.58528,1.79533812756046962742e+09,'BA',0);
INSERT INTO "samples" VALUES(276,8,'eval',7,0,'cand','shape=s3,cls=large,n=8192','cls=large',206.05361,1.79533812756046962742e+09,'BA',0);
CREATE INDEX samples_by_version ON samples (version, stage);
CREATE INDEX commands_pending ON commands (status, id);
COMMIT;
