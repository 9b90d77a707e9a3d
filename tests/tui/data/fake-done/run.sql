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
INSERT INTO "events" VALUES(1,1.7953380000005905628e+09,NULL,'info','init','created from @REPO@ at 13735b12faa3',NULL);
INSERT INTO "events" VALUES(2,1.79533800004923748969e+09,NULL,'info','engine','engine started (pid 7278, proposer command)',NULL);
INSERT INTO "events" VALUES(3,1.7953380000921189785e+09,0,'info','baseline','measuring the unmodified baseline',NULL);
INSERT INTO "events" VALUES(4,1.79533800029946064946e+09,0,'info','verdict','v0: baseline: baseline over 4 configs in 2 classes',NULL);
INSERT INTO "events" VALUES(5,1.79533800032913351063e+09,1,'info','iteration','v1 started from 13735b12fa',NULL);
INSERT INTO "events" VALUES(6,1.79533800040379214286e+09,1,'info','plan','v1: gain5: scripted hypothesis for v1 [global]',NULL);
INSERT INTO "events" VALUES(7,1.79533800092955517766e+09,1,'info','decision','v1 eval: keep: cls=small faster by -5.05% (all targets improved) (3 rounds, 0.4 GPU-s)',NULL);
INSERT INTO "events" VALUES(8,1.79533800097364306452e+09,1,'info','verdict','v1: keep: cls=small faster by -5.05% (all targets improved)',NULL);
INSERT INTO "events" VALUES(9,1.79533800099788832657e+09,2,'info','iteration','v2 started from 02e5ee3a42',NULL);
INSERT INTO "events" VALUES(10,1.79533800107477140429e+09,2,'info','plan','v2: loss5: scripted hypothesis for v2 [global]',NULL);
INSERT INTO "events" VALUES(11,1.79533800160934662822e+09,2,'info','decision','v2 eval: regression: cls=small slower by +5.15% (3 rounds, 0.4 GPU-s)',NULL);
INSERT INTO "events" VALUES(12,1.79533800161065125464e+09,2,'warn','verdict','v2: regression: cls=small slower by +5.15%',NULL);
INSERT INTO "events" VALUES(13,1.79533800166405773162e+09,3,'info','iteration','v3 started from 02e5ee3a42',NULL);
INSERT INTO "events" VALUES(14,1.79533800173936176295e+09,3,'info','plan','v3: gain1: scripted hypothesis for v3 [global]',NULL);
INSERT INTO "events" VALUES(15,1.7953380023965075016e+09,3,'info','decision','v3 eval: keep: cls=large faster by -1.02% (all targets improved) (5 rounds, 0.5 GPU-s)',NULL);
INSERT INTO "events" VALUES(16,1.79533800243303966518e+09,3,'info','verdict','v3: keep: cls=large faster by -1.02% (all targets improved)',NULL);
INSERT INTO "events" VALUES(17,1.79533800243933486934e+09,NULL,'info','stop','run stopped: --max-iters 3 reached in this session',NULL);
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
INSERT INTO "iterations" VALUES(0,'baseline','done',0,NULL,'baseline (unmodified)',NULL,'global','13735b12faa3798e95db9b0935f830ca6ce8b22c','13735b12faa3798e95db9b0935f830ca6ce8b22c',0,1.79533800006985616677e+09,1.79533800029885292053e+09,'{"gpu": {"before": null, "after": null, "name": "no GPU (CPU-only target)"}, "classes": {"cls=large": {"best": 165.97373608613248, "configs": 2}, "cls=small": {"best": 11.839045958469944, "configs": 2}}, "configs": {"shape=s0,cls=small,n=128": {"cls": "cls=small", "production": true, "row": {"shape": "s0", "cls": "small", "n": 128}}, "shape=s1,cls=small,n=256": {"cls": "cls=small", "production": true, "row": {"shape": "s1", "cls": "small", "n": 256}}, "shape=s2,cls=large,n=4096": {"cls": "cls=large", "production": true, "row": {"shape": "s2", "cls": "large", "n": 4096}}, "shape=s3,cls=large,n=8192": {"cls": "cls=large", "production": true, "row": {"shape": "s3", "cls": "large", "n": 8192}}}, "config_columns": ["shape", "cls", "n"], "decision": {"verdict": "baseline", "reason": "baseline over 4 configs in 2 classes", "by": "engine"}}');
INSERT INTO "iterations" VALUES(1,'keep','done',0,0,'gain5: scripted hypothesis for v1',NULL,'global','02e5ee3a4282a6bf1738414727f608c7439c39c9','13735b12faa3798e95db9b0935f830ca6ce8b22c',0,1.79533800032840561871e+09,1795338000.97247,'{"proposal": {"command": "/work/main/.venv/bin/python /work/wt/tui/tests/fake_target/proposer.py", "exit": 0, "seconds": 0.1}, "changed_files": ["kernel.json"], "evaluated_tree": "08f95a5597a408d7ca5764c2f1b3c16bcc221c50", "gpu": {"before": null, "after": null, "name": "no GPU (CPU-only target)"}, "gpu_seconds": {"eval": 0.4051598900005047}, "classes": {"cls=large": {"cls": "cls=large", "rounds": 3, "n": 3, "best": 166.27543798975714, "cand": 157.93203309432505, "ratio": 0.9498217836843349, "lo": 0.9368727744954218, "hi": 0.962949767909709, "verdict": "improved", "delta_pct": -5.017821631566511, "interval": [0.9368727744954218, 0.962949767909709]}, "cls=small": {"cls": "cls=small", "rounds": 3, "n": 3, "best": 11.845142458683222, "cand": 11.247150705674544, "ratio": 0.949515866517053, "lo": 0.9301181134968454, "hi": 0.9693181625912803, "verdict": "improved", "delta_pct": -5.0484133482947, "interval": [0.9301181134968454, 0.9693181625912803]}}, "decision": {"verdict": "keep", "reason": "cls=small faster by -5.05% (all targets improved)", "rounds": 3, "gpu_seconds": 0.4051598900005047, "flags": [], "classes": {"cls=large": {"cls": "cls=large", "rounds": 3, "n": 3, "best": 166.27543798975714, "cand": 157.93203309432505, "ratio": 0.9498217836843349, "lo": 0.9368727744954218, "hi": 0.962949767909709, "verdict": "improved", "delta_pct": -5.017821631566511, "interval": [0.9368727744954218, 0.962949767909709]}, "cls=small": {"cls": "cls=small", "rounds": 3, "n": 3, "best": 11.845142458683222, "cand": 11.247150705674544, "ratio": 0.949515866517053, "lo": 0.9301181134968454, "hi": 0.9693181625912803, "verdict": "improved", "delta_pct": -5.0484133482947, "interval": [0.9301181134968454, 0.9693181625912803]}}, "by": "engine"}, "commit_tree": "08f95a5597a408d7ca5764c2f1b3c16bcc221c50", "keep_status": "keep"}');
INSERT INTO "iterations" VALUES(2,'regression','done',0,1,'loss5: scripted hypothesis for v2',NULL,'global',NULL,'02e5ee3a4282a6bf1738414727f608c7439c39c9',0,1.79533800099728584292e+09,1.79533800160987544059e+09,'{"proposal": {"command": "/work/main/.venv/bin/python /work/wt/tui/tests/fake_target/proposer.py", "exit": 0, "seconds": 0.1}, "changed_files": ["kernel.json"], "evaluated_tree": "d0b66a29ed4844452afa1ac918eecf5528c0bc32", "gpu": {"before": null, "after": null, "name": "no GPU (CPU-only target)"}, "gpu_seconds": {"eval": 0.4110665769985644}, "classes": {"cls=large": {"cls": "cls=large", "rounds": 3, "n": 3, "best": 157.75183047724676, "cand": 165.74162670270027, "ratio": 1.0506478828250807, "lo": 1.0265965904539838, "hi": 1.0752626532654594, "verdict": "regressed", "delta_pct": 5.06478828250807, "interval": [1.0265965904539838, 1.0752626532654594]}, "cls=small": {"cls": "cls=small", "rounds": 3, "n": 3, "best": 11.236859541294484, "cand": 11.816007183497574, "ratio": 1.0515399912292906, "lo": 1.0360567146029813, "hi": 1.0672546565930194, "verdict": "regressed", "delta_pct": 5.153999122929065, "interval": [1.0360567146029813, 1.0672546565930194]}}, "decision": {"verdict": "regression", "reason": "cls=small slower by +5.15%", "rounds": 3, "gpu_seconds": 0.4110665769985644, "flags": [], "classes": {"cls=large": {"cls": "cls=large", "rounds": 3, "n": 3, "best": 157.75183047724676, "cand": 165.74162670270027, "ratio": 1.0506478828250807, "lo": 1.0265965904539838, "hi": 1.0752626532654594, "verdict": "regressed", "delta_pct": 5.06478828250807, "interval": [1.0265965904539838, 1.0752626532654594]}, "cls=small": {"cls": "cls=small", "rounds": 3, "n": 3, "best": 11.236859541294484, "cand": 11.816007183497574, "ratio": 1.0515399912292906, "lo": 1.0360567146029813, "hi": 1.0672546565930194, "verdict": "regressed", "delta_pct": 5.153999122929065, "interval": [1.0360567146029813, 1.0672546565930194]}}, "by": "engine"}}');
INSERT INTO "iterations" VALUES(3,'keep','done',0,1,'gain1: scripted hypothesis for v3',NULL,'global','caa6be74cf0af76d1a95687ef25f778b0aed0484','02e5ee3a4282a6bf1738414727f608c7439c39c9',0,1.79533800166310906413e+09,1.79533800243213343622e+09,'{"proposal": {"command": "/work/main/.venv/bin/python /work/wt/tui/tests/fake_target/proposer.py", "exit": 0, "seconds": 0.1}, "changed_files": ["kernel.json"], "evaluated_tree": "1ac800e66f6d551829c9ba3bf17f58fa3962d3fa", "gpu": {"before": null, "after": null, "name": "no GPU (CPU-only target)"}, "gpu_seconds": {"eval": 0.4990176879982755}, "classes": {"cls=large": {"cls": "cls=large", "rounds": 5, "n": 5, "best": 157.70549489120972, "cand": 156.1037122387334, "ratio": 0.9898432032848241, "lo": 0.9803023286896345, "hi": 0.9994769352418469, "verdict": "improved", "delta_pct": -1.0156796715175886, "interval": [0.9803023286896345, 0.9994769352418469]}, "cls=small": {"cls": "cls=small", "rounds": 5, "n": 5, "best": 11.236650475164717, "cand": 11.12285007343907, "ratio": 0.9898723910673233, "lo": 0.986578476269856, "hi": 0.9931773033423902, "verdict": "improved", "delta_pct": -1.0127608932676724, "interval": [0.986578476269856, 0.9931773033423902]}}, "decision": {"verdict": "keep", "reason": "cls=large faster by -1.02% (all targets improved)", "rounds": 5, "gpu_seconds": 0.4990176879982755, "flags": [], "classes": {"cls=large": {"cls": "cls=large", "rounds": 5, "n": 5, "best": 157.70549489120972, "cand": 156.1037122387334, "ratio": 0.9898432032848241, "lo": 0.9803023286896345, "hi": 0.9994769352418469, "verdict": "improved", "delta_pct": -1.0156796715175886, "interval": [0.9803023286896345, 0.9994769352418469]}, "cls=small": {"cls": "cls=small", "rounds": 5, "n": 5, "best": 11.236650475164717, "cand": 11.12285007343907, "ratio": 0.9898723910673233, "lo": 0.986578476269856, "hi": 0.9931773033423902, "verdict": "improved", "delta_pct": -1.0127608932676724, "interval": [0.986578476269856, 0.9931773033423902]}}, "by": "engine"}, "commit_tree": "1ac800e66f6d551829c9ba3bf17f58fa3962d3fa", "keep_status": "keep"}');
CREATE TABLE meta (
  key   TEXT PRIMARY KEY,
  value TEXT NOT NULL
);
INSERT INTO "meta" VALUES('schema_version','1');
INSERT INTO "meta" VALUES('tag','"fake-done"');
INSERT INTO "meta" VALUES('repo','"@REPO@"');
INSERT INTO "meta" VALUES('baseline_commit','"13735b12faa3798e95db9b0935f830ca6ce8b22c"');
INSERT INTO "meta" VALUES('created_at','1795338000.0');
INSERT INTO "meta" VALUES('state','"stopped"');
INSERT INTO "meta" VALUES('stop_reason','"--max-iters 3 reached in this session"');
INSERT INTO "meta" VALUES('config_source','"@REPO@/kopt.toml"');
INSERT INTO "meta" VALUES('heartbeat','{"t": 1795338002.0499325, "pid": 7278}');
INSERT INTO "meta" VALUES('engine_pid','null');
INSERT INTO "meta" VALUES('engine_started_at','1795338000.0483932');
INSERT INTO "meta" VALUES('last_error','null');
INSERT INTO "meta" VALUES('progress','null');
INSERT INTO "meta" VALUES('gpu','{"chosen": null, "waited_s": 6.391999704646878e-06, "assessments": [], "t": 1795338002.3076692}');
INSERT INTO "meta" VALUES('live_log','"@ROOT@/fake-done/logs/v3/eval_r4_cand.out"');
INSERT INTO "meta" VALUES('child_pgid','null');
INSERT INTO "meta" VALUES('config_columns','["shape", "cls", "n"]');
INSERT INTO "meta" VALUES('classes','["cls=large", "cls=small"]');
INSERT INTO "meta" VALUES('live_classes','{"version": 3, "stage": "eval", "verdict": {"verdict": "keep", "reason": "cls=large faster by -1.02% (all targets improved)", "rounds": 5, "gpu_seconds": 0.4990176879982755, "flags": [], "classes": {"cls=large": {"cls": "cls=large", "rounds": 5, "n": 5, "best": 157.70549489120972, "cand": 156.1037122387334, "ratio": 0.9898432032848241, "lo": 0.9803023286896345, "hi": 0.9994769352418469, "verdict": "improved", "delta_pct": -1.0156796715175886, "interval": [0.9803023286896345, 0.9994769352418469]}, "cls=small": {"cls": "cls=small", "rounds": 5, "n": 5, "best": 11.236650475164717, "cand": 11.12285007343907, "ratio": 0.9898723910673233, "lo": 0.986578476269856, "hi": 0.9931773033423902, "verdict": "improved", "delta_pct": -1.0127608932676724, "interval": [0.986578476269856, 0.9931773033423902]}}}}');
INSERT INTO "meta" VALUES('active_s','2.389650545999757');
INSERT INTO "meta" VALUES('stop_time','1795338002.438743');
INSERT INTO "meta" VALUES('best_commit','"caa6be74cf0af76d1a95687ef25f778b0aed0484"');
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
  t       REAL NOT NULL
);
INSERT INTO "samples" VALUES(1,0,'baseline',0,0,'best','shape=s0,cls=small,n=128','cls=small',9.992503,1.79533800017152833945e+09);
INSERT INTO "samples" VALUES(2,0,'baseline',0,0,'best','shape=s1,cls=small,n=256','cls=small',14.013835,1.79533800017152833945e+09);
INSERT INTO "samples" VALUES(3,0,'baseline',0,0,'best','shape=s2,cls=large,n=4096','cls=large',119.9087,1.79533800017152833945e+09);
INSERT INTO "samples" VALUES(4,0,'baseline',0,0,'best','shape=s3,cls=large,n=8192','cls=large',229.801769,1.79533800017152833945e+09);
INSERT INTO "samples" VALUES(5,0,'baseline',1,0,'best','shape=s0,cls=small,n=128','cls=small',10.024396,1.79533800025102281573e+09);
INSERT INTO "samples" VALUES(6,0,'baseline',1,0,'best','shape=s1,cls=small,n=256','cls=small',14.005363,1.79533800025102281573e+09);
INSERT INTO "samples" VALUES(7,0,'baseline',1,0,'best','shape=s2,cls=large,n=4096','cls=large',119.701256,1.79533800025102281573e+09);
INSERT INTO "samples" VALUES(8,0,'baseline',1,0,'best','shape=s3,cls=large,n=8192','cls=large',230.125724,1.79533800025102281573e+09);
INSERT INTO "samples" VALUES(9,0,'baseline',2,0,'best','shape=s0,cls=small,n=128','cls=small',10.037897,1.79533800029749059674e+09);
INSERT INTO "samples" VALUES(10,0,'baseline',2,0,'best','shape=s1,cls=small,n=256','cls=small',13.953194,1.79533800029749059674e+09);
INSERT INTO "samples" VALUES(11,0,'baseline',2,0,'best','shape=s2,cls=large,n=4096','cls=large',120.083133,1.79533800029749059674e+09);
INSERT INTO "samples" VALUES(12,0,'baseline',2,0,'best','shape=s3,cls=large,n=8192','cls=large',229.343414,1.79533800029749059674e+09);
INSERT INTO "samples" VALUES(13,1,'eval',0,0,'best','shape=s0,cls=small,n=128','cls=small',9.992132,1.79533800061371278766e+09);
INSERT INTO "samples" VALUES(14,1,'eval',0,0,'cand','shape=s0,cls=small,n=128','cls=small',9.486155,1.79533800061371278766e+09);
INSERT INTO "samples" VALUES(15,1,'eval',0,0,'best','shape=s1,cls=small,n=256','cls=small',13.989856,1.79533800061371278766e+09);
INSERT INTO "samples" VALUES(16,1,'eval',0,0,'cand','shape=s1,cls=small,n=256','cls=small',13.32436,1.79533800061371278766e+09);
INSERT INTO "samples" VALUES(17,1,'eval',0,0,'best','shape=s2,cls=large,n=4096','cls=large',119.982464,1.79533800061371278766e+09);
INSERT INTO "samples" VALUES(18,1,'eval',0,0,'cand','shape=s2,cls=large,n=4096','cls=large',113.857437,1.79533800061371278766e+09);
INSERT INTO "samples" VALUES(19,1,'eval',0,0,'best','shape=s3,cls=large,n=8192','cls=large',229.625347,1.79533800061371278766e+09);
INSERT INTO "samples" VALUES(20,1,'eval',0,0,'cand','shape=s3,cls=large,n=8192','cls=large',218.128605,1.79533800061371278766e+09);
INSERT INTO "samples" VALUES(21,1,'eval',1,0,'best','shape=s0,cls=small,n=128','cls=small',10.047983,1.79533800077126526827e+09);
INSERT INTO "samples" VALUES(22,1,'eval',1,0,'cand','shape=s0,cls=small,n=128','cls=small',9.509515,1.79533800077126526827e+09);
INSERT INTO "samples" VALUES(23,1,'eval',1,0,'best','shape=s1,cls=small,n=256','cls=small',13.991028,1.79533800077126526827e+09);
INSERT INTO "samples" VALUES(24,1,'eval',1,0,'cand','shape=s1,cls=small,n=256','cls=small',13.28914,1.79533800077126526827e+09);
INSERT INTO "samples" VALUES(25,1,'eval',1,0,'best','shape=s2,cls=large,n=4096','cls=large',120.330029,1.79533800077126526827e+09);
INSERT INTO "samples" VALUES(26,1,'eval',1,0,'cand','shape=s2,cls=large,n=4096','cls=large',114.080089,1.79533800077126526827e+09);
INSERT INTO "samples" VALUES(27,1,'eval',1,0,'best','shape=s3,cls=large,n=8192','cls=large',230.215741,1.79533800077126526827e+09);
INSERT INTO "samples" VALUES(28,1,'eval',1,0,'cand','shape=s3,cls=large,n=8192','cls=large',218.760439,1.79533800077126526827e+09);
INSERT INTO "samples" VALUES(29,1,'eval',2,0,'best','shape=s0,cls=small,n=128','cls=small',10.035648,1.79533800092656087871e+09);
INSERT INTO "samples" VALUES(30,1,'eval',2,0,'cand','shape=s0,cls=small,n=128','cls=small',9.5001,1.79533800092656087871e+09);
INSERT INTO "samples" VALUES(31,1,'eval',2,0,'best','shape=s1,cls=small,n=256','cls=small',14.005428,1.79533800092656087871e+09);
INSERT INTO "samples" VALUES(32,1,'eval',2,0,'cand','shape=s1,cls=small,n=256','cls=small',13.339363,1.79533800092656087871e+09);
INSERT INTO "samples" VALUES(33,1,'eval',2,0,'best','shape=s2,cls=large,n=4096','cls=large',120.187384,1.79533800092656087871e+09);
INSERT INTO "samples" VALUES(34,1,'eval',2,0,'cand','shape=s2,cls=large,n=4096','cls=large',114.471963,1.79533800092656087871e+09);
INSERT INTO "samples" VALUES(35,1,'eval',2,0,'best','shape=s3,cls=large,n=8192','cls=large',230.389712,1.79533800092656087871e+09);
INSERT INTO "samples" VALUES(36,1,'eval',2,0,'cand','shape=s3,cls=large,n=8192','cls=large',218.710465,1.79533800092656087871e+09);
INSERT INTO "samples" VALUES(37,2,'eval',0,0,'best','shape=s0,cls=small,n=128','cls=small',9.494169,1.79533800128715562822e+09);
INSERT INTO "samples" VALUES(38,2,'eval',0,0,'cand','shape=s0,cls=small,n=128','cls=small',9.9874,1.79533800128715562822e+09);
INSERT INTO "samples" VALUES(39,2,'eval',0,0,'best','shape=s1,cls=small,n=256','cls=small',13.271647,1.79533800128715562822e+09);
INSERT INTO "samples" VALUES(40,2,'eval',0,0,'cand','shape=s1,cls=small,n=256','cls=small',13.952336,1.79533800128715562822e+09);
INSERT INTO "samples" VALUES(41,2,'eval',0,0,'best','shape=s2,cls=large,n=4096','cls=large',114.066936,1.79533800128715562822e+09);
INSERT INTO "samples" VALUES(42,2,'eval',0,0,'cand','shape=s2,cls=large,n=4096','cls=large',119.697122,1.79533800128715562822e+09);
INSERT INTO "samples" VALUES(43,2,'eval',0,0,'best','shape=s3,cls=large,n=8192','cls=large',217.93668,1.79533800128715562822e+09);
INSERT INTO "samples" VALUES(44,2,'eval',0,0,'cand','shape=s3,cls=large,n=8192','cls=large',230.030879,1.79533800128715562822e+09);
INSERT INTO "samples" VALUES(45,2,'eval',1,0,'best','shape=s0,cls=small,n=128','cls=small',9.473264,1.79533800145122575753e+09);
INSERT INTO "samples" VALUES(46,2,'eval',1,0,'cand','shape=s0,cls=small,n=128','cls=small',9.970743,1.79533800145122575753e+09);
INSERT INTO "samples" VALUES(47,2,'eval',1,0,'best','shape=s1,cls=small,n=256','cls=small',13.315348,1.79533800145122575753e+09);
INSERT INTO "samples" VALUES(48,2,'eval',1,0,'cand','shape=s1,cls=small,n=256','cls=small',14.016954,1.79533800145122575753e+09);
INSERT INTO "samples" VALUES(49,2,'eval',1,0,'best','shape=s2,cls=large,n=4096','cls=large',113.79002,1.79533800145122575753e+09);
INSERT INTO "samples" VALUES(50,2,'eval',1,0,'cand','shape=s2,cls=large,n=4096','cls=large',119.526484,1.79533800145122575753e+09);
INSERT INTO "samples" VALUES(51,2,'eval',1,0,'best','shape=s3,cls=large,n=8192','cls=large',218.895911,1.79533800145122575753e+09);
INSERT INTO "samples" VALUES(52,2,'eval',1,0,'cand','shape=s3,cls=large,n=8192','cls=large',229.988231,1.79533800145122575753e+09);
INSERT INTO "samples" VALUES(53,2,'eval',2,0,'best','shape=s0,cls=small,n=128','cls=small',9.497149,1.79533800160564231867e+09);
INSERT INTO "samples" VALUES(54,2,'eval',2,0,'cand','shape=s0,cls=small,n=128','cls=small',9.977224,1.79533800160564231867e+09);
INSERT INTO "samples" VALUES(55,2,'eval',2,0,'best','shape=s1,cls=small,n=256','cls=small',13.33652,1.79533800160564231867e+09);
INSERT INTO "samples" VALUES(56,2,'eval',2,0,'cand','shape=s1,cls=small,n=256','cls=small',14.006648,1.79533800160564231867e+09);
INSERT INTO "samples" VALUES(57,2,'eval',2,0,'best','shape=s2,cls=large,n=4096','cls=large',113.865972,1.79533800160564231867e+09);
INSERT INTO "samples" VALUES(58,2,'eval',2,0,'cand','shape=s2,cls=large,n=4096','cls=large',119.567698,1.79533800160564231867e+09);
INSERT INTO "samples" VALUES(59,2,'eval',2,0,'best','shape=s3,cls=large,n=8192','cls=large',218.585101,1.79533800160564231867e+09);
INSERT INTO "samples" VALUES(60,2,'eval',2,0,'cand','shape=s3,cls=large,n=8192','cls=large',229.053066,1.79533800160564231867e+09);
INSERT INTO "samples" VALUES(61,3,'eval',0,0,'best','shape=s0,cls=small,n=128','cls=small',9.485485,1.79533800195239734648e+09);
INSERT INTO "samples" VALUES(62,3,'eval',0,0,'cand','shape=s0,cls=small,n=128','cls=small',9.432411,1.79533800195239734648e+09);
INSERT INTO "samples" VALUES(63,3,'eval',0,0,'best','shape=s1,cls=small,n=256','cls=small',13.347883,1.79533800195239734648e+09);
INSERT INTO "samples" VALUES(64,3,'eval',0,0,'cand','shape=s1,cls=small,n=256','cls=small',13.168958,1.79533800195239734648e+09);
INSERT INTO "samples" VALUES(65,3,'eval',0,0,'best','shape=s2,cls=large,n=4096','cls=large',113.696428,1.79533800195239734648e+09);
INSERT INTO "samples" VALUES(66,3,'eval',0,0,'cand','shape=s2,cls=large,n=4096','cls=large',112.631013,1.79533800195239734648e+09);
INSERT INTO "samples" VALUES(67,3,'eval',0,0,'best','shape=s3,cls=large,n=8192','cls=large',218.381502,1.79533800195239734648e+09);
INSERT INTO "samples" VALUES(68,3,'eval',0,0,'cand','shape=s3,cls=large,n=8192','cls=large',216.259118,1.79533800195239734648e+09);
INSERT INTO "samples" VALUES(69,3,'eval',1,0,'best','shape=s0,cls=small,n=128','cls=small',9.491903,1.79533800204866576194e+09);
INSERT INTO "samples" VALUES(70,3,'eval',1,0,'cand','shape=s0,cls=small,n=128','cls=small',9.414869,1.79533800204866576194e+09);
INSERT INTO "samples" VALUES(71,3,'eval',1,0,'best','shape=s1,cls=small,n=256','cls=small',13.267721,1.79533800204866576194e+09);
INSERT INTO "samples" VALUES(72,3,'eval',1,0,'cand','shape=s1,cls=small,n=256','cls=small',13.104966,1.79533800204866576194e+09);
INSERT INTO "samples" VALUES(73,3,'eval',1,0,'best','shape=s2,cls=large,n=4096','cls=large',113.974495,1.79533800204866576194e+09);
INSERT INTO "samples" VALUES(74,3,'eval',1,0,'cand','shape=s2,cls=large,n=4096','cls=large',112.803774,1.79533800204866576194e+09);
INSERT INTO "samples" VALUES(75,3,'eval',1,0,'best','shape=s3,cls=large,n=8192','cls=large',217.992351,1.79533800204866576194e+09);
INSERT INTO "samples" VALUES(76,3,'eval',1,0,'cand','shape=s3,cls=large,n=8192','cls=large',216.555344,1.79533800204866576194e+09);
INSERT INTO "samples" VALUES(77,3,'eval',2,0,'best','shape=s0,cls=small,n=128','cls=small',9.497215,1.79533800217486739156e+09);
INSERT INTO "samples" VALUES(78,3,'eval',2,0,'cand','shape=s0,cls=small,n=128','cls=small',9.370846,1.79533800217486739156e+09);
INSERT INTO "samples" VALUES(79,3,'eval',2,0,'best','shape=s1,cls=small,n=256','cls=small',13.235166,1.79533800217486739156e+09);
INSERT INTO "samples" VALUES(80,3,'eval',2,0,'cand','shape=s1,cls=small,n=256','cls=small',13.172403,1.79533800217486739156e+09);
INSERT INTO "samples" VALUES(81,3,'eval',2,0,'best','shape=s2,cls=large,n=4096','cls=large',114.465396,1.79533800217486739156e+09);
INSERT INTO "samples" VALUES(82,3,'eval',2,0,'cand','shape=s2,cls=large,n=4096','cls=large',112.679644,1.79533800217486739156e+09);
INSERT INTO "samples" VALUES(83,3,'eval',2,0,'best','shape=s3,cls=large,n=8192','cls=large',218.878069,1.79533800217486739156e+09);
INSERT INTO "samples" VALUES(84,3,'eval',2,0,'cand','shape=s3,cls=large,n=8192','cls=large',215.647089,1.79533800217486739156e+09);
INSERT INTO "samples" VALUES(85,3,'eval',3,0,'best','shape=s0,cls=small,n=128','cls=small',9.519063,1.79533800230329823491e+09);
INSERT INTO "samples" VALUES(86,3,'eval',3,0,'cand','shape=s0,cls=small,n=128','cls=small',9.410801,1.79533800230329823491e+09);
INSERT INTO "samples" VALUES(87,3,'eval',3,0,'best','shape=s1,cls=small,n=256','cls=small',13.319109,1.79533800230329823491e+09);
INSERT INTO "samples" VALUES(88,3,'eval',3,0,'cand','shape=s1,cls=small,n=256','cls=small',13.161032,1.79533800230329823491e+09);
INSERT INTO "samples" VALUES(89,3,'eval',3,0,'best','shape=s2,cls=large,n=4096','cls=large',113.834774,1.79533800230329823491e+09);
INSERT INTO "samples" VALUES(90,3,'eval',3,0,'cand','shape=s2,cls=large,n=4096','cls=large',112.965451,1.79533800230329823491e+09);
INSERT INTO "samples" VALUES(91,3,'eval',3,0,'best','shape=s3,cls=large,n=8192','cls=large',217.825416,1.79533800230329823491e+09);
INSERT INTO "samples" VALUES(92,3,'eval',3,0,'cand','shape=s3,cls=large,n=8192','cls=large',215.575587,1.79533800230329823491e+09);
INSERT INTO "samples" VALUES(93,3,'eval',4,0,'best','shape=s0,cls=small,n=128','cls=small',9.505003,1.79533800239381575577e+09);
INSERT INTO "samples" VALUES(94,3,'eval',4,0,'cand','shape=s0,cls=small,n=128','cls=small',9.406149,1.79533800239381575577e+09);
INSERT INTO "samples" VALUES(95,3,'eval',4,0,'best','shape=s1,cls=small,n=256','cls=small',13.286172,1.79533800239381575577e+09);
INSERT INTO "samples" VALUES(96,3,'eval',4,0,'cand','shape=s1,cls=small,n=256','cls=small',13.151168,1.79533800239381575577e+09);
INSERT INTO "samples" VALUES(97,3,'eval',4,0,'best','shape=s2,cls=large,n=4096','cls=large',114.017852,1.79533800239381575577e+09);
INSERT INTO "samples" VALUES(98,3,'eval',4,0,'cand','shape=s2,cls=large,n=4096','cls=large',112.845359,1.79533800239381575577e+09);
INSERT INTO "samples" VALUES(99,3,'eval',4,0,'best','shape=s3,cls=large,n=8192','cls=large',217.782929,1.79533800239381575577e+09);
INSERT INTO "samples" VALUES(100,3,'eval',4,0,'cand','shape=s3,cls=large,n=8192','cls=large',216.266559,1.79533800239381575577e+09);
CREATE INDEX samples_by_version ON samples (version, stage);
CREATE INDEX commands_pending ON commands (status, id);
COMMIT;
