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
INSERT INTO "events" VALUES(1,1.79533800000040841098e+09,NULL,'info','init','created from @REPO@ at 4677983ea8e2',NULL);
INSERT INTO "events" VALUES(2,1.79533800131287360184e+09,NULL,'info','engine','engine started (pid 7296, proposer command)',NULL);
INSERT INTO "events" VALUES(3,1.79533800139621686937e+09,0,'info','baseline','measuring the unmodified baseline',NULL);
INSERT INTO "events" VALUES(4,1.79533800167810297012e+09,0,'info','verdict','v0: baseline: baseline over 4 configs in 2 classes',NULL);
INSERT INTO "events" VALUES(5,1.79533800172760105128e+09,1,'info','iteration','v1 started from 4677983ea8',NULL);
INSERT INTO "events" VALUES(6,1.79533800181841564176e+09,1,'info','plan','v1: gain5: scripted hypothesis for v1 [global]',NULL);
INSERT INTO "events" VALUES(7,1.79533800257997465136e+09,1,'info','decision','v1 eval: keep: cls=small faster by -4.98% (all targets improved) (5 rounds, 0.6 GPU-s)',NULL);
INSERT INTO "events" VALUES(8,1.79533800262002706527e+09,1,'info','verdict','v1: keep: cls=small faster by -4.98% (all targets improved)',NULL);
INSERT INTO "events" VALUES(9,1.79533800265563797953e+09,2,'info','iteration','v2 started from 629d25bbf3',NULL);
INSERT INTO "events" VALUES(10,1.79533800273352742195e+09,2,'info','plan','v2: split: faster small rows, slower large [class cls=small]',NULL);
INSERT INTO "events" VALUES(11,1.79533800322796249391e+09,2,'info','decision','v2 eval: split: cls=small improved while cls=large regressed: specialise by dispatch (3 rounds, 0.4 GPU-s)',NULL);
INSERT INTO "events" VALUES(12,1.79533800322891807553e+09,2,'warn','verdict','v2: split: cls=small improved while cls=large regressed: specialise by dispatch',NULL);
INSERT INTO "events" VALUES(13,1.79533800326682043075e+09,3,'info','iteration','v3 started from 629d25bbf3',NULL);
INSERT INTO "events" VALUES(14,1.79533800334115719796e+09,3,'info','plan','v3: nochange: scripted hypothesis for v3 [global]',NULL);
INSERT INTO "events" VALUES(15,1.79533800336561846734e+09,3,'warn','verdict','v3: fail_propose: the proposer changed nothing',NULL);
INSERT INTO "events" VALUES(16,1.79533800341629242898e+09,4,'info','iteration','v4 started from 629d25bbf3',NULL);
INSERT INTO "events" VALUES(17,1.79533800350049877166e+09,4,'info','plan','v4: wrong_fixed_on_repair: scripted hypothesis for v4 [global]',NULL);
INSERT INTO "events" VALUES(18,1.79533800372901535032e+09,4,'warn','repair','v4: correctness fails (shape=s0,cls=small,n=128: fails ''err == 0'' (+3 more)); repair 1',NULL);
INSERT INTO "events" VALUES(19,1.79533800488529896735e+09,4,'info','decision','v4 eval: keep: cls=large faster by -5.30% (all targets improved) (6 rounds, 0.9 GPU-s)',NULL);
INSERT INTO "events" VALUES(20,1.79533800493794870375e+09,4,'info','verdict','v4: keep: cls=large faster by -5.30% (all targets improved)',NULL);
INSERT INTO "events" VALUES(21,1.79533800497796154019e+09,5,'info','iteration','v5 started from 338f5bee05',NULL);
INSERT INTO "events" VALUES(22,1.79533800505615758901e+09,5,'info','plan','v5: protected: scripted hypothesis for v5 [global]',NULL);
INSERT INTO "events" VALUES(23,1.79533800509753179545e+09,5,'warn','verdict','v5: fail_protected: the candidate changes protected file(s): bench.py',NULL);
INSERT INTO "events" VALUES(24,1.79533800515593409538e+09,6,'info','iteration','v6 started from 338f5bee05',NULL);
INSERT INTO "events" VALUES(25,1.79533800523975110049e+09,6,'info','plan','v6: loss5: scripted hypothesis for v6 [global]',NULL);
INSERT INTO "events" VALUES(26,1.79533800591645383839e+09,6,'info','decision','v6 eval: regression: cls=large slower by +5.29% (4 rounds, 0.5 GPU-s)',NULL);
INSERT INTO "events" VALUES(27,1.79533800591775035858e+09,6,'warn','verdict','v6: regression: cls=large slower by +5.29%',NULL);
INSERT INTO "events" VALUES(28,1.79533800598331642148e+09,7,'info','iteration','v7 started from 338f5bee05',NULL);
INSERT INTO "events" VALUES(29,1.79533800606046557431e+09,7,'info','plan','v7: loss5: scripted hypothesis for v7 [global]',NULL);
INSERT INTO "events" VALUES(30,1.79533800694658875465e+09,7,'info','decision','v7 eval: regression: cls=large slower by +4.63% (5 rounds, 0.7 GPU-s)',NULL);
INSERT INTO "events" VALUES(31,1.7953380069479794502e+09,7,'warn','verdict','v7: regression: cls=large slower by +4.63%',NULL);
INSERT INTO "events" VALUES(32,1.79533800700378322603e+09,8,'info','iteration','v8 started from 338f5bee05',NULL);
INSERT INTO "events" VALUES(33,1795338007.08004,8,'info','plan','v8: gain05: scripted hypothesis for v8 [global]',NULL);
INSERT INTO "events" VALUES(34,1.79533800825165820117e+09,8,'info','decision','v8 eval: borderline: undecided after 8 rounds (8 rounds, 0.9 GPU-s)',NULL);
INSERT INTO "events" VALUES(35,1.79533800825257444386e+09,8,'warn','review','v8 is borderline: undecided after 8 rounds; awaiting the engineer',NULL);
INSERT INTO "events" VALUES(36,1.79533800847325277329e+09,NULL,'info','command','masked v3 (make_fixture, offline)',NULL);
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
INSERT INTO "iterations" VALUES(0,'baseline','done',0,NULL,'baseline (unmodified)',NULL,'global','4677983ea8e212cca0c8969e2b42d088d5696882','4677983ea8e212cca0c8969e2b42d088d5696882',0,1.79533800135608172417e+09,1.79533800167377781864e+09,'{"gpu": {"before": {"index": 1, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-9f3b77c4", "util_pct": 0.0, "mem_used_mib": 3.0, "mem_total_mib": 81559.0, "processes": [], "sm_clock_mhz": null, "mem_clock_mhz": null, "temp_c": null, "power_w": null, "throttle": [], "vendor": "nvidia", "backend": "fake", "extra": {}}, "after": {"index": 1, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-9f3b77c4", "util_pct": 0.0, "mem_used_mib": 3.0, "mem_total_mib": 81559.0, "processes": [], "sm_clock_mhz": null, "mem_clock_mhz": null, "temp_c": null, "power_w": null, "throttle": [], "vendor": "nvidia", "backend": "fake", "extra": {}}, "index": 1, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-9f3b77c4"}, "classes": {"cls=large": {"best": 165.5978170342271, "configs": 2}, "cls=small": {"best": 11.82604440444299, "configs": 2}}, "configs": {"shape=s0,cls=small,n=128": {"cls": "cls=small", "production": true, "row": {"shape": "s0", "cls": "small", "n": 128}}, "shape=s1,cls=small,n=256": {"cls": "cls=small", "production": true, "row": {"shape": "s1", "cls": "small", "n": 256}}, "shape=s2,cls=large,n=4096": {"cls": "cls=large", "production": true, "row": {"shape": "s2", "cls": "large", "n": 4096}}, "shape=s3,cls=large,n=8192": {"cls": "cls=large", "production": true, "row": {"shape": "s3", "cls": "large", "n": 8192}}}, "config_columns": ["shape", "cls", "n"], "decision": {"verdict": "baseline", "reason": "baseline over 4 configs in 2 classes", "by": "engine"}}');
INSERT INTO "iterations" VALUES(1,'keep','done',0,0,'gain5: scripted hypothesis for v1',NULL,'global','629d25bbf317704bdfd38e7f8d8d1efeaea06114','4677983ea8e212cca0c8969e2b42d088d5696882',0,1.7953380017240524292e+09,1.79533800261906147004e+09,'{"proposal": {"command": "/work/main/.venv/bin/python /work/wt/tui/tests/fake_target/proposer.py", "exit": 0, "seconds": 0.1}, "changed_files": ["kernel.json"], "evaluated_tree": "104107ff811517fcea773a1636bc1ad9cce4b635", "gpu": {"before": {"index": 1, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-9f3b77c4", "util_pct": 0.0, "mem_used_mib": 3.0, "mem_total_mib": 81559.0, "processes": [], "sm_clock_mhz": null, "mem_clock_mhz": null, "temp_c": null, "power_w": null, "throttle": [], "vendor": "nvidia", "backend": "fake", "extra": {}}, "after": {"index": 1, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-9f3b77c4", "util_pct": 0.0, "mem_used_mib": 3.0, "mem_total_mib": 81559.0, "processes": [], "sm_clock_mhz": null, "mem_clock_mhz": null, "temp_c": null, "power_w": null, "throttle": [], "vendor": "nvidia", "backend": "fake", "extra": {}}, "index": 1, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-9f3b77c4"}, "gpu_seconds": {"eval": 0.6016404440051701}, "classes": {"cls=large": {"cls": "cls=large", "rounds": 5, "n": 5, "best": 165.7259662484275, "cand": 158.92765515993955, "ratio": 0.9589786003824091, "lo": 0.9200754376370364, "hi": 0.9995266891954528, "verdict": "improved", "delta_pct": -4.102139961759088, "interval": [0.9200754376370364, 0.9995266891954528]}, "cls=small": {"cls": "cls=small", "rounds": 5, "n": 5, "best": 11.827927552315014, "cand": 11.239466656193843, "ratio": 0.9502481822349341, "lo": 0.9288642040964061, "hi": 0.9721244546388804, "verdict": "improved", "delta_pct": -4.975181776506588, "interval": [0.9288642040964061, 0.9721244546388804]}}, "decision": {"verdict": "keep", "reason": "cls=small faster by -4.98% (all targets improved)", "rounds": 5, "gpu_seconds": 0.6016404440051701, "flags": [], "classes": {"cls=large": {"cls": "cls=large", "rounds": 5, "n": 5, "best": 165.7259662484275, "cand": 158.92765515993955, "ratio": 0.9589786003824091, "lo": 0.9200754376370364, "hi": 0.9995266891954528, "verdict": "improved", "delta_pct": -4.102139961759088, "interval": [0.9200754376370364, 0.9995266891954528]}, "cls=small": {"cls": "cls=small", "rounds": 5, "n": 5, "best": 11.827927552315014, "cand": 11.239466656193843, "ratio": 0.9502481822349341, "lo": 0.9288642040964061, "hi": 0.9721244546388804, "verdict": "improved", "delta_pct": -4.975181776506588, "interval": [0.9288642040964061, 0.9721244546388804]}}, "by": "engine"}, "commit_tree": "104107ff811517fcea773a1636bc1ad9cce4b635", "keep_status": "keep"}');
INSERT INTO "iterations" VALUES(2,'split','done',0,1,'split: faster small rows, slower large','cls=small','class',NULL,'629d25bbf317704bdfd38e7f8d8d1efeaea06114',0,1.79533800265475821495e+09,1.79533800322838544847e+09,'{"proposal": {"command": "/work/main/.venv/bin/python /work/wt/tui/tests/fake_target/proposer.py", "exit": 0, "seconds": 0.1}, "changed_files": ["kernel.json"], "evaluated_tree": "e2ebcd9102f08058381d740bc7f236d6625bdf96", "gpu": {"before": {"index": 1, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-9f3b77c4", "util_pct": 0.0, "mem_used_mib": 3.0, "mem_total_mib": 81559.0, "processes": [], "sm_clock_mhz": null, "mem_clock_mhz": null, "temp_c": null, "power_w": null, "throttle": [], "vendor": "nvidia", "backend": "fake", "extra": {}}, "after": {"index": 1, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-9f3b77c4", "util_pct": 0.0, "mem_used_mib": 3.0, "mem_total_mib": 81559.0, "processes": [], "sm_clock_mhz": null, "mem_clock_mhz": null, "temp_c": null, "power_w": null, "throttle": [], "vendor": "nvidia", "backend": "fake", "extra": {}}, "index": 1, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-9f3b77c4"}, "gpu_seconds": {"eval": 0.3876756369991199}, "classes": {"cls=large": {"cls": "cls=large", "rounds": 3, "n": 3, "best": 158.15452241454727, "cand": 166.08197267616205, "ratio": 1.0501247143653327, "lo": 1.0126691079008046, "hi": 1.0889656918702926, "verdict": "regressed", "delta_pct": 5.012471436533272, "interval": [1.0126691079008046, 1.0889656918702926]}, "cls=small": {"cls": "cls=small", "rounds": 3, "n": 3, "best": 11.274425378676906, "cand": 10.718432199979514, "ratio": 0.9506854531363587, "lo": 0.916058269447355, "hi": 0.9866215512145695, "verdict": "improved", "delta_pct": -4.931454686364134, "interval": [0.916058269447355, 0.9866215512145695]}}, "decision": {"verdict": "split", "reason": "cls=small improved while cls=large regressed: specialise by dispatch", "rounds": 3, "gpu_seconds": 0.3876756369991199, "flags": [], "classes": {"cls=large": {"cls": "cls=large", "rounds": 3, "n": 3, "best": 158.15452241454727, "cand": 166.08197267616205, "ratio": 1.0501247143653327, "lo": 1.0126691079008046, "hi": 1.0889656918702926, "verdict": "regressed", "delta_pct": 5.012471436533272, "interval": [1.0126691079008046, 1.0889656918702926]}, "cls=small": {"cls": "cls=small", "rounds": 3, "n": 3, "best": 11.274425378676906, "cand": 10.718432199979514, "ratio": 0.9506854531363587, "lo": 0.916058269447355, "hi": 0.9866215512145695, "verdict": "improved", "delta_pct": -4.931454686364134, "interval": [0.916058269447355, 0.9866215512145695]}}, "by": "engine"}}');
INSERT INTO "iterations" VALUES(3,'fail_propose','done',1,1,'nochange: scripted hypothesis for v3',NULL,'global',NULL,'629d25bbf317704bdfd38e7f8d8d1efeaea06114',0,1.79533800326617956166e+09,1.79533800336486959459e+09,'{"proposal": {"command": "/work/main/.venv/bin/python /work/wt/tui/tests/fake_target/proposer.py", "exit": 0, "seconds": 0.1}, "changed_files": [], "decision": {"verdict": "fail_propose", "reason": "the proposer changed nothing", "by": "engine"}}');
INSERT INTO "iterations" VALUES(4,'keep','done',0,1,'wrong_fixed_on_repair: scripted hypothesis for v4',NULL,'global','338f5bee0501cf33d4e94c3a2adad40133ae7347','629d25bbf317704bdfd38e7f8d8d1efeaea06114',1,1.79533800341547298434e+09,1.79533800493671274189e+09,'{"proposal": {"command": "/work/main/.venv/bin/python /work/wt/tui/tests/fake_target/proposer.py", "exit": 0, "seconds": 0.1}, "changed_files": ["kernel.json"], "evaluated_tree": "2c90758b0515ba20cf9b3a4a7a030d1dbc28f88c", "gpu": {"before": {"index": 1, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-9f3b77c4", "util_pct": 0.0, "mem_used_mib": 3.0, "mem_total_mib": 81559.0, "processes": [], "sm_clock_mhz": null, "mem_clock_mhz": null, "temp_c": null, "power_w": null, "throttle": [], "vendor": "nvidia", "backend": "fake", "extra": {}}, "after": {"index": 1, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-9f3b77c4", "util_pct": 0.0, "mem_used_mib": 3.0, "mem_total_mib": 81559.0, "processes": [], "sm_clock_mhz": null, "mem_clock_mhz": null, "temp_c": null, "power_w": null, "throttle": [], "vendor": "nvidia", "backend": "fake", "extra": {}}, "index": 1, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-9f3b77c4"}, "failing_rows": [{"config": "shape=s0,cls=small,n=128", "cls": "cls=small", "reasons": ["fails ''err == 0''"]}, {"config": "shape=s1,cls=small,n=256", "cls": "cls=small", "reasons": ["fails ''err == 0''"]}, {"config": "shape=s2,cls=large,n=4096", "cls": "cls=large", "reasons": ["fails ''err == 0''"]}, {"config": "shape=s3,cls=large,n=8192", "cls": "cls=large", "reasons": ["fails ''err == 0''"]}], "repairs": [{"command": "/work/main/.venv/bin/python /work/wt/tui/tests/fake_target/proposer.py", "exit": 0, "seconds": 0.1}], "gpu_seconds": {"eval": 0.8510458159980772}, "classes": {"cls=large": {"cls": "cls=large", "rounds": 6, "n": 6, "best": 157.78417087507037, "cand": 149.421856283486, "ratio": 0.9470015620375163, "lo": 0.9110148313245626, "hi": 0.984409833589189, "verdict": "improved", "delta_pct": -5.299843796248371, "interval": [0.9110148313245626, 0.984409833589189]}, "cls=small": {"cls": "cls=small", "rounds": 6, "n": 6, "best": 11.233572823536202, "cand": 10.722125101975104, "ratio": 0.9544714998874155, "lo": 0.9224002058386945, "hi": 0.9876578933208165, "verdict": "improved", "delta_pct": -4.552850011258447, "interval": [0.9224002058386945, 0.9876578933208165]}}, "decision": {"verdict": "keep", "reason": "cls=large faster by -5.30% (all targets improved)", "rounds": 6, "gpu_seconds": 0.8510458159980772, "flags": [], "classes": {"cls=large": {"cls": "cls=large", "rounds": 6, "n": 6, "best": 157.78417087507037, "cand": 149.421856283486, "ratio": 0.9470015620375163, "lo": 0.9110148313245626, "hi": 0.984409833589189, "verdict": "improved", "delta_pct": -5.299843796248371, "interval": [0.9110148313245626, 0.984409833589189]}, "cls=small": {"cls": "cls=small", "rounds": 6, "n": 6, "best": 11.233572823536202, "cand": 10.722125101975104, "ratio": 0.9544714998874155, "lo": 0.9224002058386945, "hi": 0.9876578933208165, "verdict": "improved", "delta_pct": -4.552850011258447, "interval": [0.9224002058386945, 0.9876578933208165]}}, "by": "engine"}, "commit_tree": "2c90758b0515ba20cf9b3a4a7a030d1dbc28f88c", "keep_status": "keep"}');
INSERT INTO "iterations" VALUES(5,'fail_protected','done',0,4,'protected: scripted hypothesis for v5',NULL,'global',NULL,'338f5bee0501cf33d4e94c3a2adad40133ae7347',0,1.7953380049769673347e+09,1.79533800509680032731e+09,'{"proposal": {"command": "/work/main/.venv/bin/python /work/wt/tui/tests/fake_target/proposer.py", "exit": 0, "seconds": 0.1}, "changed_files": ["bench.py", "kernel.json"], "decision": {"verdict": "fail_protected", "reason": "the candidate changes protected file(s): bench.py", "by": "engine"}}');
INSERT INTO "iterations" VALUES(6,'regression','done',0,4,'loss5: scripted hypothesis for v6',NULL,'global',NULL,'338f5bee0501cf33d4e94c3a2adad40133ae7347',0,1.79533800515509486201e+09,1.79533800591697168349e+09,'{"proposal": {"command": "/work/main/.venv/bin/python /work/wt/tui/tests/fake_target/proposer.py", "exit": 0, "seconds": 0.1}, "changed_files": ["kernel.json"], "evaluated_tree": "101cfca861c6a0be561e21353b92fb77f376590e", "gpu": {"before": {"index": 1, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-9f3b77c4", "util_pct": 0.0, "mem_used_mib": 3.0, "mem_total_mib": 81559.0, "processes": [], "sm_clock_mhz": null, "mem_clock_mhz": null, "temp_c": null, "power_w": null, "throttle": [], "vendor": "nvidia", "backend": "fake", "extra": {}}, "after": {"index": 1, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-9f3b77c4", "util_pct": 0.0, "mem_used_mib": 3.0, "mem_total_mib": 81559.0, "processes": [], "sm_clock_mhz": null, "mem_clock_mhz": null, "temp_c": null, "power_w": null, "throttle": [], "vendor": "nvidia", "backend": "fake", "extra": {}}, "index": 1, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-9f3b77c4"}, "gpu_seconds": {"eval": 0.5186947000020155}, "classes": {"cls=large": {"cls": "cls=large", "rounds": 4, "n": 4, "best": 150.18835210483329, "cand": 158.13974944925178, "ratio": 1.0529428363317301, "lo": 1.023668755817442, "hi": 1.083054074163839, "verdict": "regressed", "delta_pct": 5.294283633173014, "interval": [1.023668755817442, 1.083054074163839]}, "cls=small": {"cls": "cls=small", "rounds": 4, "n": 4, "best": 10.648734534950176, "cand": 11.192264435788866, "ratio": 1.0510417363729723, "lo": 1.0026768581467465, "hi": 1.1017395311583384, "verdict": "regressed", "delta_pct": 5.104173637297227, "interval": [1.0026768581467465, 1.1017395311583384]}}, "decision": {"verdict": "regression", "reason": "cls=large slower by +5.29%", "rounds": 4, "gpu_seconds": 0.5186947000020155, "flags": [], "classes": {"cls=large": {"cls": "cls=large", "rounds": 4, "n": 4, "best": 150.18835210483329, "cand": 158.13974944925178, "ratio": 1.0529428363317301, "lo": 1.023668755817442, "hi": 1.083054074163839, "verdict": "regressed", "delta_pct": 5.294283633173014, "interval": [1.023668755817442, 1.083054074163839]}, "cls=small": {"cls": "cls=small", "rounds": 4, "n": 4, "best": 10.648734534950176, "cand": 11.192264435788866, "ratio": 1.0510417363729723, "lo": 1.0026768581467465, "hi": 1.1017395311583384, "verdict": "regressed", "delta_pct": 5.104173637297227, "interval": [1.0026768581467465, 1.1017395311583384]}}, "by": "engine"}}');
INSERT INTO "iterations" VALUES(7,'regression','done',0,4,'loss5: scripted hypothesis for v7',NULL,'global',NULL,'338f5bee0501cf33d4e94c3a2adad40133ae7347',0,1.79533800598256802552e+09,1.79533800694719815251e+09,'{"proposal": {"command": "/work/main/.venv/bin/python /work/wt/tui/tests/fake_target/proposer.py", "exit": 0, "seconds": 0.1}, "changed_files": ["kernel.json"], "evaluated_tree": "101cfca861c6a0be561e21353b92fb77f376590e", "gpu": {"before": {"index": 1, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-9f3b77c4", "util_pct": 0.0, "mem_used_mib": 3.0, "mem_total_mib": 81559.0, "processes": [], "sm_clock_mhz": null, "mem_clock_mhz": null, "temp_c": null, "power_w": null, "throttle": [], "vendor": "nvidia", "backend": "fake", "extra": {}}, "after": {"index": 1, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-9f3b77c4", "util_pct": 0.0, "mem_used_mib": 3.0, "mem_total_mib": 81559.0, "processes": [], "sm_clock_mhz": null, "mem_clock_mhz": null, "temp_c": null, "power_w": null, "throttle": [], "vendor": "nvidia", "backend": "fake", "extra": {}}, "index": 1, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-9f3b77c4"}, "gpu_seconds": {"eval": 0.6940150679984072}, "classes": {"cls=large": {"cls": "cls=large", "rounds": 5, "n": 5, "best": 150.4176407935407, "cand": 157.38674802643038, "ratio": 1.0463317147917195, "lo": 1.0227021923894362, "hi": 1.0705071970375577, "verdict": "regressed", "delta_pct": 4.633171479171949, "interval": [1.0227021923894362, 1.0705071970375577]}, "cls=small": {"cls": "cls=small", "rounds": 5, "n": 5, "best": 10.677227950218276, "cand": 11.162935793177247, "ratio": 1.04549006963451, "lo": 1.0097837921977855, "hi": 1.0824589324466773, "verdict": "regressed", "delta_pct": 4.549006963450997, "interval": [1.0097837921977855, 1.0824589324466773]}}, "decision": {"verdict": "regression", "reason": "cls=large slower by +4.63%", "rounds": 5, "gpu_seconds": 0.6940150679984072, "flags": [], "classes": {"cls=large": {"cls": "cls=large", "rounds": 5, "n": 5, "best": 150.4176407935407, "cand": 157.38674802643038, "ratio": 1.0463317147917195, "lo": 1.0227021923894362, "hi": 1.0705071970375577, "verdict": "regressed", "delta_pct": 4.633171479171949, "interval": [1.0227021923894362, 1.0705071970375577]}, "cls=small": {"cls": "cls=small", "rounds": 5, "n": 5, "best": 10.677227950218276, "cand": 11.162935793177247, "ratio": 1.04549006963451, "lo": 1.0097837921977855, "hi": 1.0824589324466773, "verdict": "regressed", "delta_pct": 4.549006963450997, "interval": [1.0097837921977855, 1.0824589324466773]}}, "by": "engine"}}');
INSERT INTO "iterations" VALUES(8,'borderline','review',0,4,'gain05: scripted hypothesis for v8',NULL,'global',NULL,'338f5bee0501cf33d4e94c3a2adad40133ae7347',0,1.7953380070029213429e+09,NULL,'{"proposal": {"command": "/work/main/.venv/bin/python /work/wt/tui/tests/fake_target/proposer.py", "exit": 0, "seconds": 0.1}, "changed_files": ["kernel.json"], "evaluated_tree": "b4552ee7598afd888fb7c1e388c4b1532a7090ed", "gpu": {"before": {"index": 1, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-9f3b77c4", "util_pct": 0.0, "mem_used_mib": 3.0, "mem_total_mib": 81559.0, "processes": [], "sm_clock_mhz": null, "mem_clock_mhz": null, "temp_c": null, "power_w": null, "throttle": [], "vendor": "nvidia", "backend": "fake", "extra": {}}, "after": {"index": 1, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-9f3b77c4", "util_pct": 0.0, "mem_used_mib": 3.0, "mem_total_mib": 81559.0, "processes": [], "sm_clock_mhz": null, "mem_clock_mhz": null, "temp_c": null, "power_w": null, "throttle": [], "vendor": "nvidia", "backend": "fake", "extra": {}}, "index": 1, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-9f3b77c4"}, "gpu_seconds": {"eval": 0.9383811429979687}, "classes": {"cls=large": {"cls": "cls=large", "rounds": 8, "n": 8, "best": 149.89958690134108, "cand": 149.51801484939705, "ratio": 0.9974544822982392, "lo": 0.9775960869375457, "hi": 1.0177162711172032, "verdict": "undecided", "delta_pct": -0.2545517701760813, "interval": [0.9775960869375457, 1.0177162711172032]}, "cls=small": {"cls": "cls=small", "rounds": 8, "n": 8, "best": 10.695682669519229, "cand": 10.650423754028026, "ratio": 0.995768487445856, "lo": 0.9763407387972861, "hi": 1.0155828197967685, "verdict": "undecided", "delta_pct": -0.42315125541440013, "interval": [0.9763407387972861, 1.0155828197967685]}}, "decision": {"verdict": "borderline", "reason": "undecided after 8 rounds", "rounds": 8, "gpu_seconds": 0.9383811429979687, "flags": ["undecided_at_max_rounds"], "classes": {"cls=large": {"cls": "cls=large", "rounds": 8, "n": 8, "best": 149.89958690134108, "cand": 149.51801484939705, "ratio": 0.9974544822982392, "lo": 0.9775960869375457, "hi": 1.0177162711172032, "verdict": "undecided", "delta_pct": -0.2545517701760813, "interval": [0.9775960869375457, 1.0177162711172032]}, "cls=small": {"cls": "cls=small", "rounds": 8, "n": 8, "best": 10.695682669519229, "cand": 10.650423754028026, "ratio": 0.995768487445856, "lo": 0.9763407387972861, "hi": 1.0155828197967685, "verdict": "undecided", "delta_pct": -0.42315125541440013, "interval": [0.9763407387972861, 1.0155828197967685]}}, "by": "engine"}, "review": {"opened_at": 1795338008.2519934, "deadline": 1795339808.2519886, "reason": "undecided after 8 rounds"}}');
CREATE TABLE meta (
  key   TEXT PRIMARY KEY,
  value TEXT NOT NULL
);
INSERT INTO "meta" VALUES('schema_version','1');
INSERT INTO "meta" VALUES('tag','"fake-review"');
INSERT INTO "meta" VALUES('repo','"@REPO@"');
INSERT INTO "meta" VALUES('baseline_commit','"4677983ea8e212cca0c8969e2b42d088d5696882"');
INSERT INTO "meta" VALUES('created_at','1795338000.0');
INSERT INTO "meta" VALUES('state','"awaiting_review"');
INSERT INTO "meta" VALUES('stop_reason','null');
INSERT INTO "meta" VALUES('config_source','"@REPO@/kopt.toml"');
INSERT INTO "meta" VALUES('heartbeat','{"t": 1795338008.3273716, "pid": 7296}');
INSERT INTO "meta" VALUES('engine_pid','7296');
INSERT INTO "meta" VALUES('engine_started_at','1795338001.3121731');
INSERT INTO "meta" VALUES('last_error','null');
INSERT INTO "meta" VALUES('progress','{"version": 8, "phase": "review", "step": "awaiting the engineer: 1800 s left", "done": null, "total": null, "phase_started_at": 1795338008.253337, "eta_s": null, "t": 1795338008.2533374}');
INSERT INTO "meta" VALUES('gpu','{"chosen": {"index": 1, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-9f3b77c4", "util_pct": 0.0, "mem_used_mib": 3.0, "mem_total_mib": 81559.0, "processes": [], "sm_clock_mhz": null, "mem_clock_mhz": null, "temp_c": null, "power_w": null, "throttle": [], "vendor": "nvidia", "backend": "fake", "extra": {}}, "waited_s": 4.1047000195248984e-05, "assessments": [{"gpu": {"index": 0, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-5c1d0e2a", "util_pct": 97.0, "mem_used_mib": 61234.0, "mem_total_mib": 81559.0, "processes": [{"pid": 4711, "name": "python train.py", "mem_mib": 61000.0, "user": null}], "sm_clock_mhz": null, "mem_clock_mhz": null, "temp_c": null, "power_w": null, "throttle": [], "vendor": "nvidia", "backend": "fake", "extra": {}}, "idle": false, "reasons": ["1 foreign process(es): 4711 python train.py", "utilization 97% > 10%", "memory used 61234 MiB > 2048 MiB"]}, {"gpu": {"index": 1, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-9f3b77c4", "util_pct": 0.0, "mem_used_mib": 3.0, "mem_total_mib": 81559.0, "processes": [], "sm_clock_mhz": null, "mem_clock_mhz": null, "temp_c": null, "power_w": null, "throttle": [], "vendor": "nvidia", "backend": "fake", "extra": {}}, "idle": true, "reasons": []}], "t": 1795338008.1602712}');
INSERT INTO "meta" VALUES('live_log','"@ROOT@/fake-review/logs/v8/eval_r7_best.out"');
INSERT INTO "meta" VALUES('child_pgid','null');
INSERT INTO "meta" VALUES('config_columns','["shape", "cls", "n"]');
INSERT INTO "meta" VALUES('classes','["cls=large", "cls=small"]');
INSERT INTO "meta" VALUES('live_classes','{"version": 8, "stage": "eval", "verdict": {"verdict": "borderline", "reason": "undecided after 8 rounds", "rounds": 8, "gpu_seconds": 0.9383811429979687, "flags": ["undecided_at_max_rounds"], "classes": {"cls=large": {"cls": "cls=large", "rounds": 8, "n": 8, "best": 149.89958690134108, "cand": 149.51801484939705, "ratio": 0.9974544822982392, "lo": 0.9775960869375457, "hi": 1.0177162711172032, "verdict": "undecided", "delta_pct": -0.2545517701760813, "interval": [0.9775960869375457, 1.0177162711172032]}, "cls=small": {"cls": "cls=small", "rounds": 8, "n": 8, "best": 10.695682669519229, "cand": 10.650423754028026, "ratio": 0.995768487445856, "lo": 0.9763407387972861, "hi": 1.0155828197967685, "verdict": "undecided", "delta_pct": -0.42315125541440013, "interval": [0.9763407387972861, 1.0155828197967685]}}}}');
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
INSERT INTO "samples" VALUES(1,0,'baseline',0,0,'best','shape=s0,cls=small,n=128','cls=small',9.806261,1.79533800148589944836e+09);
INSERT INTO "samples" VALUES(2,0,'baseline',0,0,'best','shape=s1,cls=small,n=256','cls=small',14.148251,1.79533800148589944836e+09);
INSERT INTO "samples" VALUES(3,0,'baseline',0,0,'best','shape=s2,cls=large,n=4096','cls=large',120.72584,1.79533800148589944836e+09);
INSERT INTO "samples" VALUES(4,0,'baseline',0,0,'best','shape=s3,cls=large,n=8192','cls=large',226.097967,1.79533800148589944836e+09);
INSERT INTO "samples" VALUES(5,0,'baseline',1,0,'best','shape=s0,cls=small,n=128','cls=small',9.987993,1.79533800157329177858e+09);
INSERT INTO "samples" VALUES(6,0,'baseline',1,0,'best','shape=s1,cls=small,n=256','cls=small',14.051672,1.79533800157329177858e+09);
INSERT INTO "samples" VALUES(7,0,'baseline',1,0,'best','shape=s2,cls=large,n=4096','cls=large',121.234318,1.79533800157329177858e+09);
INSERT INTO "samples" VALUES(8,0,'baseline',1,0,'best','shape=s3,cls=large,n=8192','cls=large',227.471154,1.79533800157329177858e+09);
INSERT INTO "samples" VALUES(9,0,'baseline',2,0,'best','shape=s0,cls=small,n=128','cls=small',10.059818,1.79533800166778540613e+09);
INSERT INTO "samples" VALUES(10,0,'baseline',2,0,'best','shape=s1,cls=small,n=256','cls=small',13.964792,1.79533800166778540613e+09);
INSERT INTO "samples" VALUES(11,0,'baseline',2,0,'best','shape=s2,cls=large,n=4096','cls=large',118.380251,1.79533800166778540613e+09);
INSERT INTO "samples" VALUES(12,0,'baseline',2,0,'best','shape=s3,cls=large,n=8192','cls=large',231.419308,1.79533800166778540613e+09);
INSERT INTO "samples" VALUES(13,1,'eval',0,0,'best','shape=s0,cls=small,n=128','cls=small',10.07015,1.79533800204303288462e+09);
INSERT INTO "samples" VALUES(14,1,'eval',0,0,'cand','shape=s0,cls=small,n=128','cls=small',9.459013,1.79533800204303288462e+09);
INSERT INTO "samples" VALUES(15,1,'eval',0,0,'best','shape=s1,cls=small,n=256','cls=small',13.693357,1.79533800204303288462e+09);
INSERT INTO "samples" VALUES(16,1,'eval',0,0,'cand','shape=s1,cls=small,n=256','cls=small',12.879555,1.79533800204303288462e+09);
INSERT INTO "samples" VALUES(17,1,'eval',0,0,'best','shape=s2,cls=large,n=4096','cls=large',119.819618,1.79533800204303288462e+09);
INSERT INTO "samples" VALUES(18,1,'eval',0,0,'cand','shape=s2,cls=large,n=4096','cls=large',115.868473,1.79533800204303288462e+09);
INSERT INTO "samples" VALUES(19,1,'eval',0,0,'best','shape=s3,cls=large,n=8192','cls=large',234.208973,1.79533800204303288462e+09);
INSERT INTO "samples" VALUES(20,1,'eval',0,0,'cand','shape=s3,cls=large,n=8192','cls=large',219.860777,1.79533800204303288462e+09);
INSERT INTO "samples" VALUES(21,1,'eval',1,0,'best','shape=s0,cls=small,n=128','cls=small',9.968038,1.79533800220111680028e+09);
INSERT INTO "samples" VALUES(22,1,'eval',1,0,'cand','shape=s0,cls=small,n=128','cls=small',9.435998,1.79533800220111680028e+09);
INSERT INTO "samples" VALUES(23,1,'eval',1,0,'best','shape=s1,cls=small,n=256','cls=small',14.118321,1.79533800220111680028e+09);
INSERT INTO "samples" VALUES(24,1,'eval',1,0,'cand','shape=s1,cls=small,n=256','cls=small',13.597569,1.79533800220111680028e+09);
INSERT INTO "samples" VALUES(25,1,'eval',1,0,'best','shape=s2,cls=large,n=4096','cls=large',119.388226,1.79533800220111680028e+09);
INSERT INTO "samples" VALUES(26,1,'eval',1,0,'cand','shape=s2,cls=large,n=4096','cls=large',114.316003,1.79533800220111680028e+09);
INSERT INTO "samples" VALUES(27,1,'eval',1,0,'best','shape=s3,cls=large,n=8192','cls=large',232.163605,1.79533800220111680028e+09);
INSERT INTO "samples" VALUES(28,1,'eval',1,0,'cand','shape=s3,cls=large,n=8192','cls=large',219.59341,1.79533800220111680028e+09);
INSERT INTO "samples" VALUES(29,1,'eval',2,0,'best','shape=s0,cls=small,n=128','cls=small',9.945224,1.79533800232221078872e+09);
INSERT INTO "samples" VALUES(30,1,'eval',2,0,'cand','shape=s0,cls=small,n=128','cls=small',9.40645,1.79533800232221078872e+09);
INSERT INTO "samples" VALUES(31,1,'eval',2,0,'best','shape=s1,cls=small,n=256','cls=small',13.874326,1.79533800232221078872e+09);
INSERT INTO "samples" VALUES(32,1,'eval',2,0,'cand','shape=s1,cls=small,n=256','cls=small',13.28834,1.79533800232221078872e+09);
INSERT INTO "samples" VALUES(33,1,'eval',2,0,'best','shape=s2,cls=large,n=4096','cls=large',117.329137,1.79533800232221078872e+09);
INSERT INTO "samples" VALUES(34,1,'eval',2,0,'cand','shape=s2,cls=large,n=4096','cls=large',114.441941,1.79533800232221078872e+09);
INSERT INTO "samples" VALUES(35,1,'eval',2,0,'best','shape=s3,cls=large,n=8192','cls=large',229.05787,1.79533800232221078872e+09);
INSERT INTO "samples" VALUES(36,1,'eval',2,0,'cand','shape=s3,cls=large,n=8192','cls=large',222.723275,1.79533800232221078872e+09);
INSERT INTO "samples" VALUES(37,1,'eval',3,0,'best','shape=s0,cls=small,n=128','cls=small',9.968269,1.79533800248873758311e+09);
INSERT INTO "samples" VALUES(38,1,'eval',3,0,'cand','shape=s0,cls=small,n=128','cls=small',9.582309,1.79533800248873758311e+09);
INSERT INTO "samples" VALUES(39,1,'eval',3,0,'best','shape=s1,cls=small,n=256','cls=small',14.163013,1.79533800248873758311e+09);
INSERT INTO "samples" VALUES(40,1,'eval',3,0,'cand','shape=s1,cls=small,n=256','cls=small',13.264038,1.79533800248873758311e+09);
INSERT INTO "samples" VALUES(41,1,'eval',3,0,'best','shape=s2,cls=large,n=4096','cls=large',117.465373,1.79533800248873758311e+09);
INSERT INTO "samples" VALUES(42,1,'eval',3,0,'cand','shape=s2,cls=large,n=4096','cls=large',115.574278,1.79533800248873758311e+09);
INSERT INTO "samples" VALUES(43,1,'eval',3,0,'best','shape=s3,cls=large,n=8192','cls=large',229.909071,1.79533800248873758311e+09);
INSERT INTO "samples" VALUES(44,1,'eval',3,0,'cand','shape=s3,cls=large,n=8192','cls=large',219.632479,1.79533800248873758311e+09);
INSERT INTO "samples" VALUES(45,1,'eval',4,0,'best','shape=s0,cls=small,n=128','cls=small',9.907291,1.79533800257720255848e+09);
INSERT INTO "samples" VALUES(46,1,'eval',4,0,'cand','shape=s0,cls=small,n=128','cls=small',9.638459,1.79533800257720255848e+09);
INSERT INTO "samples" VALUES(47,1,'eval',4,0,'best','shape=s1,cls=small,n=256','cls=small',14.308403,1.79533800257720255848e+09);
INSERT INTO "samples" VALUES(48,1,'eval',4,0,'cand','shape=s1,cls=small,n=256','cls=small',13.44037,1.79533800257720255848e+09);
INSERT INTO "samples" VALUES(49,1,'eval',4,0,'best','shape=s2,cls=large,n=4096','cls=large',120.481754,1.79533800257720255848e+09);
INSERT INTO "samples" VALUES(50,1,'eval',4,0,'cand','shape=s2,cls=large,n=4096','cls=large',114.424265,1.79533800257720255848e+09);
INSERT INTO "samples" VALUES(51,1,'eval',4,0,'best','shape=s3,cls=large,n=8192','cls=large',229.763033,1.79533800257720255848e+09);
INSERT INTO "samples" VALUES(52,1,'eval',4,0,'cand','shape=s3,cls=large,n=8192','cls=large',217.134423,1.79533800257720255848e+09);
INSERT INTO "samples" VALUES(53,2,'eval',0,0,'best','shape=s0,cls=small,n=128','cls=small',9.539092,1.79533800293932747837e+09);
INSERT INTO "samples" VALUES(54,2,'eval',0,0,'cand','shape=s0,cls=small,n=128','cls=small',9.079939,1.79533800293932747837e+09);
INSERT INTO "samples" VALUES(55,2,'eval',0,0,'best','shape=s1,cls=small,n=256','cls=small',13.502793,1.79533800293932747837e+09);
INSERT INTO "samples" VALUES(56,2,'eval',0,0,'cand','shape=s1,cls=small,n=256','cls=small',12.747709,1.79533800293932747837e+09);
INSERT INTO "samples" VALUES(57,2,'eval',0,0,'best','shape=s2,cls=large,n=4096','cls=large',113.969273,1.79533800293932747837e+09);
INSERT INTO "samples" VALUES(58,2,'eval',0,0,'cand','shape=s2,cls=large,n=4096','cls=large',121.23937,1.79533800293932747837e+09);
INSERT INTO "samples" VALUES(59,2,'eval',0,0,'best','shape=s3,cls=large,n=8192','cls=large',219.774328,1.79533800293932747837e+09);
INSERT INTO "samples" VALUES(60,2,'eval',0,0,'cand','shape=s3,cls=large,n=8192','cls=large',228.013165,1.79533800293932747837e+09);
INSERT INTO "samples" VALUES(61,2,'eval',1,0,'best','shape=s0,cls=small,n=128','cls=small',9.505601,1.79533800306675815584e+09);
INSERT INTO "samples" VALUES(62,2,'eval',1,0,'cand','shape=s0,cls=small,n=128','cls=small',8.877866,1.79533800306675815584e+09);
INSERT INTO "samples" VALUES(63,2,'eval',1,0,'best','shape=s1,cls=small,n=256','cls=small',13.141621,1.79533800306675815584e+09);
INSERT INTO "samples" VALUES(64,2,'eval',1,0,'cand','shape=s1,cls=small,n=256','cls=small',12.731829,1.79533800306675815584e+09);
INSERT INTO "samples" VALUES(65,2,'eval',1,0,'best','shape=s2,cls=large,n=4096','cls=large',115.306219,1.79533800306675815584e+09);
INSERT INTO "samples" VALUES(66,2,'eval',1,0,'cand','shape=s2,cls=large,n=4096','cls=large',119.329927,1.79533800306675815584e+09);
INSERT INTO "samples" VALUES(67,2,'eval',1,0,'best','shape=s3,cls=large,n=8192','cls=large',217.636976,1.79533800306675815584e+09);
INSERT INTO "samples" VALUES(68,2,'eval',1,0,'cand','shape=s3,cls=large,n=8192','cls=large',230.636101,1.79533800306675815584e+09);
INSERT INTO "samples" VALUES(69,2,'eval',2,0,'best','shape=s0,cls=small,n=128','cls=small',9.639192,1.79533800322552132607e+09);
INSERT INTO "samples" VALUES(70,2,'eval',2,0,'cand','shape=s0,cls=small,n=128','cls=small',9.012448,1.79533800322552132607e+09);
INSERT INTO "samples" VALUES(71,2,'eval',2,0,'best','shape=s1,cls=small,n=256','cls=small',13.2424,1.79533800322552132607e+09);
INSERT INTO "samples" VALUES(72,2,'eval',2,0,'cand','shape=s1,cls=small,n=256','cls=small',12.859686,1.79533800322552132607e+09);
INSERT INTO "samples" VALUES(73,2,'eval',2,0,'best','shape=s2,cls=large,n=4096','cls=large',112.877121,1.79533800322552132607e+09);
INSERT INTO "samples" VALUES(74,2,'eval',2,0,'cand','shape=s2,cls=large,n=4096','cls=large',120.438255,1.79533800322552132607e+09);
INSERT INTO "samples" VALUES(75,2,'eval',2,0,'best','shape=s3,cls=large,n=8192','cls=large',220.563484,1.79533800322552132607e+09);
INSERT INTO "samples" VALUES(76,2,'eval',2,0,'cand','shape=s3,cls=large,n=8192','cls=large',229.028884,1.79533800322552132607e+09);
INSERT INTO "samples" VALUES(77,4,'eval',0,0,'best','shape=s0,cls=small,n=128','cls=small',9.433338,1.79533800403403329855e+09);
INSERT INTO "samples" VALUES(78,4,'eval',0,0,'cand','shape=s0,cls=small,n=128','cls=small',9.04926,1.79533800403403329855e+09);
INSERT INTO "samples" VALUES(79,4,'eval',0,0,'best','shape=s1,cls=small,n=256','cls=small',13.255198,1.79533800403403329855e+09);
INSERT INTO "samples" VALUES(80,4,'eval',0,0,'cand','shape=s1,cls=small,n=256','cls=small',12.864167,1.79533800403403329855e+09);
INSERT INTO "samples" VALUES(81,4,'eval',0,0,'best','shape=s2,cls=large,n=4096','cls=large',114.457781,1.79533800403403329855e+09);
INSERT INTO "samples" VALUES(82,4,'eval',0,0,'cand','shape=s2,cls=large,n=4096','cls=large',107.136859,1.79533800403403329855e+09);
INSERT INTO "samples" VALUES(83,4,'eval',0,0,'best','shape=s3,cls=large,n=8192','cls=large',216.973162,1.79533800403403329855e+09);
INSERT INTO "samples" VALUES(84,4,'eval',0,0,'cand','shape=s3,cls=large,n=8192','cls=large',208.726935,1.79533800403403329855e+09);
INSERT INTO "samples" VALUES(85,4,'eval',1,0,'best','shape=s0,cls=small,n=128','cls=small',9.298404,1.79533800419460225108e+09);
INSERT INTO "samples" VALUES(86,4,'eval',1,0,'cand','shape=s0,cls=small,n=128','cls=small',9.040529,1.79533800419460225108e+09);
INSERT INTO "samples" VALUES(87,4,'eval',1,0,'best','shape=s1,cls=small,n=256','cls=small',13.188959,1.79533800419460225108e+09);
INSERT INTO "samples" VALUES(88,4,'eval',1,0,'cand','shape=s1,cls=small,n=256','cls=small',12.843016,1.79533800419460225108e+09);
INSERT INTO "samples" VALUES(89,4,'eval',1,0,'best','shape=s2,cls=large,n=4096','cls=large',114.049255,1.79533800419460225108e+09);
INSERT INTO "samples" VALUES(90,4,'eval',1,0,'cand','shape=s2,cls=large,n=4096','cls=large',107.463893,1.79533800419460225108e+09);
INSERT INTO "samples" VALUES(91,4,'eval',1,0,'best','shape=s3,cls=large,n=8192','cls=large',222.5241,1.79533800419460225108e+09);
INSERT INTO "samples" VALUES(92,4,'eval',1,0,'cand','shape=s3,cls=large,n=8192','cls=large',208.673285,1.79533800419460225108e+09);
INSERT INTO "samples" VALUES(93,4,'eval',2,0,'best','shape=s0,cls=small,n=128','cls=small',9.502603,1.79533800435954141614e+09);
INSERT INTO "samples" VALUES(94,4,'eval',2,0,'cand','shape=s0,cls=small,n=128','cls=small',8.970514,1.79533800435954141614e+09);
INSERT INTO "samples" VALUES(95,4,'eval',2,0,'best','shape=s1,cls=small,n=256','cls=small',13.418893,1.79533800435954141614e+09);
INSERT INTO "samples" VALUES(96,4,'eval',2,0,'cand','shape=s1,cls=small,n=256','cls=small',12.796483,1.79533800435954141614e+09);
INSERT INTO "samples" VALUES(97,4,'eval',2,0,'best','shape=s2,cls=large,n=4096','cls=large',112.364882,1.79533800435954141614e+09);
INSERT INTO "samples" VALUES(98,4,'eval',2,0,'cand','shape=s2,cls=large,n=4096','cls=large',108.421434,1.79533800435954141614e+09);
INSERT INTO "samples" VALUES(99,4,'eval',2,0,'best','shape=s3,cls=large,n=8192','cls=large',214.822886,1.79533800435954141614e+09);
INSERT INTO "samples" VALUES(100,4,'eval',2,0,'cand','shape=s3,cls=large,n=8192','cls=large',210.235908,1.79533800435954141614e+09);
INSERT INTO "samples" VALUES(101,4,'eval',3,0,'best','shape=s0,cls=small,n=128','cls=small',9.611224,1.79533800452255845074e+09);
INSERT INTO "samples" VALUES(102,4,'eval',3,0,'cand','shape=s0,cls=small,n=128','cls=small',9.079463,1.79533800452255845074e+09);
INSERT INTO "samples" VALUES(103,4,'eval',3,0,'best','shape=s1,cls=small,n=256','cls=small',13.355708,1.79533800452255845074e+09);
INSERT INTO "samples" VALUES(104,4,'eval',3,0,'cand','shape=s1,cls=small,n=256','cls=small',12.777444,1.79533800452255845074e+09);
INSERT INTO "samples" VALUES(105,4,'eval',3,0,'best','shape=s2,cls=large,n=4096','cls=large',114.612376,1.79533800452255845074e+09);
INSERT INTO "samples" VALUES(106,4,'eval',3,0,'cand','shape=s2,cls=large,n=4096','cls=large',108.953497,1.79533800452255845074e+09);
INSERT INTO "samples" VALUES(107,4,'eval',3,0,'best','shape=s3,cls=large,n=8192','cls=large',220.23325,1.79533800452255845074e+09);
INSERT INTO "samples" VALUES(108,4,'eval',3,0,'cand','shape=s3,cls=large,n=8192','cls=large',203.413528,1.79533800452255845074e+09);
INSERT INTO "samples" VALUES(109,4,'eval',4,0,'best','shape=s0,cls=small,n=128','cls=small',9.517379,1.79533800469505953794e+09);
INSERT INTO "samples" VALUES(110,4,'eval',4,0,'cand','shape=s0,cls=small,n=128','cls=small',8.837347,1.79533800469505953794e+09);
INSERT INTO "samples" VALUES(111,4,'eval',4,0,'best','shape=s1,cls=small,n=256','cls=small',13.359876,1.79533800469505953794e+09);
INSERT INTO "samples" VALUES(112,4,'eval',4,0,'cand','shape=s1,cls=small,n=256','cls=small',12.599639,1.79533800469505953794e+09);
INSERT INTO "samples" VALUES(113,4,'eval',4,0,'best','shape=s2,cls=large,n=4096','cls=large',112.879928,1.79533800469505953794e+09);
INSERT INTO "samples" VALUES(114,4,'eval',4,0,'cand','shape=s2,cls=large,n=4096','cls=large',108.377711,1.79533800469505953794e+09);
INSERT INTO "samples" VALUES(115,4,'eval',4,0,'best','shape=s3,cls=large,n=8192','cls=large',218.247578,1.79533800469505953794e+09);
INSERT INTO "samples" VALUES(116,4,'eval',4,0,'cand','shape=s3,cls=large,n=8192','cls=large',206.952292,1.79533800469505953794e+09);
INSERT INTO "samples" VALUES(117,4,'eval',5,0,'best','shape=s0,cls=small,n=128','cls=small',9.503104,1.79533800488127112389e+09);
INSERT INTO "samples" VALUES(118,4,'eval',5,0,'cand','shape=s0,cls=small,n=128','cls=small',8.977703,1.79533800488127112389e+09);
INSERT INTO "samples" VALUES(119,4,'eval',5,0,'best','shape=s1,cls=small,n=256','cls=small',13.315398,1.79533800488127112389e+09);
INSERT INTO "samples" VALUES(120,4,'eval',5,0,'cand','shape=s1,cls=small,n=256','cls=small',12.830911,1.79533800488127112389e+09);
INSERT INTO "samples" VALUES(121,4,'eval',5,0,'best','shape=s2,cls=large,n=4096','cls=large',114.332849,1.79533800488127112389e+09);
INSERT INTO "samples" VALUES(122,4,'eval',5,0,'cand','shape=s2,cls=large,n=4096','cls=large',107.023329,1.79533800488127112389e+09);
INSERT INTO "samples" VALUES(123,4,'eval',5,0,'best','shape=s3,cls=large,n=8192','cls=large',220.129175,1.79533800488127112389e+09);
INSERT INTO "samples" VALUES(124,4,'eval',5,0,'cand','shape=s3,cls=large,n=8192','cls=large',203.699978,1.79533800488127112389e+09);
INSERT INTO "samples" VALUES(125,6,'eval',0,0,'best','shape=s0,cls=small,n=128','cls=small',9.110337,1.79533800546427202218e+09);
INSERT INTO "samples" VALUES(126,6,'eval',0,0,'cand','shape=s0,cls=small,n=128','cls=small',9.501609,1.79533800546427202218e+09);
INSERT INTO "samples" VALUES(127,6,'eval',0,0,'best','shape=s1,cls=small,n=256','cls=small',12.482752,1.79533800546427202218e+09);
INSERT INTO "samples" VALUES(128,6,'eval',0,0,'cand','shape=s1,cls=small,n=256','cls=small',13.350401,1.79533800546427202218e+09);
INSERT INTO "samples" VALUES(129,6,'eval',0,0,'best','shape=s2,cls=large,n=4096','cls=large',107.719932,1.79533800546427202218e+09);
INSERT INTO "samples" VALUES(130,6,'eval',0,0,'cand','shape=s2,cls=large,n=4096','cls=large',115.703011,1.79533800546427202218e+09);
INSERT INTO "samples" VALUES(131,6,'eval',0,0,'best','shape=s3,cls=large,n=8192','cls=large',211.908671,1.79533800546427202218e+09);
INSERT INTO "samples" VALUES(132,6,'eval',0,0,'cand','shape=s3,cls=large,n=8192','cls=large',216.722781,1.79533800546427202218e+09);
INSERT INTO "samples" VALUES(133,6,'eval',1,0,'best','shape=s0,cls=small,n=128','cls=small',8.99268,1.79533800562048435206e+09);
INSERT INTO "samples" VALUES(134,6,'eval',1,0,'cand','shape=s0,cls=small,n=128','cls=small',9.593106,1.79533800562048435206e+09);
INSERT INTO "samples" VALUES(135,6,'eval',1,0,'best','shape=s1,cls=small,n=256','cls=small',12.657582,1.79533800562048435206e+09);
INSERT INTO "samples" VALUES(136,6,'eval',1,0,'cand','shape=s1,cls=small,n=256','cls=small',13.317313,1.79533800562048435206e+09);
INSERT INTO "samples" VALUES(137,6,'eval',1,0,'best','shape=s2,cls=large,n=4096','cls=large',107.767715,1.79533800562048435206e+09);
INSERT INTO "samples" VALUES(138,6,'eval',1,0,'cand','shape=s2,cls=large,n=4096','cls=large',114.621421,1.79533800562048435206e+09);
INSERT INTO "samples" VALUES(139,6,'eval',1,0,'best','shape=s3,cls=large,n=8192','cls=large',209.786208,1.79533800562048435206e+09);
INSERT INTO "samples" VALUES(140,6,'eval',1,0,'cand','shape=s3,cls=large,n=8192','cls=large',219.786206,1.79533800562048435206e+09);
INSERT INTO "samples" VALUES(141,6,'eval',2,0,'best','shape=s0,cls=small,n=128','cls=small',9.049471,1.7953380057447640896e+09);
INSERT INTO "samples" VALUES(142,6,'eval',2,0,'cand','shape=s0,cls=small,n=128','cls=small',9.446152,1.7953380057447640896e+09);
INSERT INTO "samples" VALUES(143,6,'eval',2,0,'best','shape=s1,cls=small,n=256','cls=small',12.50773,1.7953380057447640896e+09);
INSERT INTO "samples" VALUES(144,6,'eval',2,0,'cand','shape=s1,cls=small,n=256','cls=small',12.929695,1.7953380057447640896e+09);
INSERT INTO "samples" VALUES(145,6,'eval',2,0,'best','shape=s2,cls=large,n=4096','cls=large',107.280437,1.7953380057447640896e+09);
INSERT INTO "samples" VALUES(146,6,'eval',2,0,'cand','shape=s2,cls=large,n=4096','cls=large',113.043344,1.7953380057447640896e+09);
INSERT INTO "samples" VALUES(147,6,'eval',2,0,'best','shape=s3,cls=large,n=8192','cls=large',208.881363,1.7953380057447640896e+09);
INSERT INTO "samples" VALUES(148,6,'eval',2,0,'cand','shape=s3,cls=large,n=8192','cls=large',218.025734,1.7953380057447640896e+09);
INSERT INTO "samples" VALUES(149,6,'eval',3,0,'best','shape=s0,cls=small,n=128','cls=small',9.013643,1.79533800591321420674e+09);
INSERT INTO "samples" VALUES(150,6,'eval',3,0,'cand','shape=s0,cls=small,n=128','cls=small',9.342105,1.79533800591321420674e+09);
INSERT INTO "samples" VALUES(151,6,'eval',3,0,'best','shape=s1,cls=small,n=256','cls=small',12.519797,1.79533800591321420674e+09);
INSERT INTO "samples" VALUES(152,6,'eval',3,0,'cand','shape=s1,cls=small,n=256','cls=small',13.316449,1.79533800591321420674e+09);
INSERT INTO "samples" VALUES(153,6,'eval',3,0,'best','shape=s2,cls=large,n=4096','cls=large',108.550588,1.79533800591321420674e+09);
INSERT INTO "samples" VALUES(154,6,'eval',3,0,'cand','shape=s2,cls=large,n=4096','cls=large',114.253592,1.79533800591321420674e+09);
INSERT INTO "samples" VALUES(155,6,'eval',3,0,'best','shape=s3,cls=large,n=8192','cls=large',206.218301,1.79533800591321420674e+09);
INSERT INTO "samples" VALUES(156,6,'eval',3,0,'cand','shape=s3,cls=large,n=8192','cls=large',219.882319,1.79533800591321420674e+09);
INSERT INTO "samples" VALUES(157,7,'eval',0,0,'best','shape=s0,cls=small,n=128','cls=small',9.096356,1.79533800629739499093e+09);
INSERT INTO "samples" VALUES(158,7,'eval',0,0,'cand','shape=s0,cls=small,n=128','cls=small',9.433959,1.79533800629739499093e+09);
INSERT INTO "samples" VALUES(159,7,'eval',0,0,'best','shape=s1,cls=small,n=256','cls=small',12.661766,1.79533800629739499093e+09);
INSERT INTO "samples" VALUES(160,7,'eval',0,0,'cand','shape=s1,cls=small,n=256','cls=small',13.051148,1.79533800629739499093e+09);
INSERT INTO "samples" VALUES(161,7,'eval',0,0,'best','shape=s2,cls=large,n=4096','cls=large',108.55887,1.79533800629739499093e+09);
INSERT INTO "samples" VALUES(162,7,'eval',0,0,'cand','shape=s2,cls=large,n=4096','cls=large',113.429911,1.79533800629739499093e+09);
INSERT INTO "samples" VALUES(163,7,'eval',0,0,'best','shape=s3,cls=large,n=8192','cls=large',205.908278,1.79533800629739499093e+09);
INSERT INTO "samples" VALUES(164,7,'eval',0,0,'cand','shape=s3,cls=large,n=8192','cls=large',220.121687,1.79533800629739499093e+09);
INSERT INTO "samples" VALUES(165,7,'eval',1,0,'best','shape=s0,cls=small,n=128','cls=small',9.036638,1.79533800646402120593e+09);
INSERT INTO "samples" VALUES(166,7,'eval',1,0,'cand','shape=s0,cls=small,n=128','cls=small',9.468199,1.79533800646402120593e+09);
INSERT INTO "samples" VALUES(167,7,'eval',1,0,'best','shape=s1,cls=small,n=256','cls=small',12.374817,1.79533800646402120593e+09);
INSERT INTO "samples" VALUES(168,7,'eval',1,0,'cand','shape=s1,cls=small,n=256','cls=small',13.266234,1.79533800646402120593e+09);
INSERT INTO "samples" VALUES(169,7,'eval',1,0,'best','shape=s2,cls=large,n=4096','cls=large',108.429117,1.79533800646402120593e+09);
INSERT INTO "samples" VALUES(170,7,'eval',1,0,'cand','shape=s2,cls=large,n=4096','cls=large',112.518333,1.79533800646402120593e+09);
INSERT INTO "samples" VALUES(171,7,'eval',1,0,'best','shape=s3,cls=large,n=8192','cls=large',207.495888,1.79533800646402120593e+09);
INSERT INTO "samples" VALUES(172,7,'eval',1,0,'cand','shape=s3,cls=large,n=8192','cls=large',218.025122,1.79533800646402120593e+09);
INSERT INTO "samples" VALUES(173,7,'eval',2,0,'best','shape=s0,cls=small,n=128','cls=small',8.915617,1795338006.62462);
INSERT INTO "samples" VALUES(174,7,'eval',2,0,'cand','shape=s0,cls=small,n=128','cls=small',9.523389,1795338006.62462);
INSERT INTO "samples" VALUES(175,7,'eval',2,0,'best','shape=s1,cls=small,n=256','cls=small',12.63877,1795338006.62462);
INSERT INTO "samples" VALUES(176,7,'eval',2,0,'cand','shape=s1,cls=small,n=256','cls=small',13.110241,1795338006.62462);
INSERT INTO "samples" VALUES(177,7,'eval',2,0,'best','shape=s2,cls=large,n=4096','cls=large',111.056226,1795338006.62462);
INSERT INTO "samples" VALUES(178,7,'eval',2,0,'cand','shape=s2,cls=large,n=4096','cls=large',114.629795,1795338006.62462);
INSERT INTO "samples" VALUES(179,7,'eval',2,0,'best','shape=s3,cls=large,n=8192','cls=large',206.134167,1795338006.62462);
INSERT INTO "samples" VALUES(180,7,'eval',2,0,'cand','shape=s3,cls=large,n=8192','cls=large',217.403021,1795338006.62462);
INSERT INTO "samples" VALUES(181,7,'eval',3,0,'best','shape=s0,cls=small,n=128','cls=small',9.11476,1.79533800678443503377e+09);
INSERT INTO "samples" VALUES(182,7,'eval',3,0,'cand','shape=s0,cls=small,n=128','cls=small',9.355709,1.79533800678443503377e+09);
INSERT INTO "samples" VALUES(183,7,'eval',3,0,'best','shape=s1,cls=small,n=256','cls=small',12.600105,1.79533800678443503377e+09);
INSERT INTO "samples" VALUES(184,7,'eval',3,0,'cand','shape=s1,cls=small,n=256','cls=small',13.195481,1.79533800678443503377e+09);
INSERT INTO "samples" VALUES(185,7,'eval',3,0,'best','shape=s2,cls=large,n=4096','cls=large',107.679838,1.79533800678443503377e+09);
INSERT INTO "samples" VALUES(186,7,'eval',3,0,'cand','shape=s2,cls=large,n=4096','cls=large',111.867221,1.79533800678443503377e+09);
INSERT INTO "samples" VALUES(187,7,'eval',3,0,'best','shape=s3,cls=large,n=8192','cls=large',209.961517,1.79533800678443503377e+09);
INSERT INTO "samples" VALUES(188,7,'eval',3,0,'cand','shape=s3,cls=large,n=8192','cls=large',217.767571,1.79533800678443503377e+09);
INSERT INTO "samples" VALUES(189,7,'eval',4,0,'best','shape=s0,cls=small,n=128','cls=small',9.171621,1.79533800694302415846e+09);
INSERT INTO "samples" VALUES(190,7,'eval',4,0,'cand','shape=s0,cls=small,n=128','cls=small',9.557541,1.79533800694302415846e+09);
INSERT INTO "samples" VALUES(191,7,'eval',4,0,'best','shape=s1,cls=small,n=256','cls=small',12.596678,1.79533800694302415846e+09);
INSERT INTO "samples" VALUES(192,7,'eval',4,0,'cand','shape=s1,cls=small,n=256','cls=small',13.187918,1.79533800694302415846e+09);
INSERT INTO "samples" VALUES(193,7,'eval',4,0,'best','shape=s2,cls=large,n=4096','cls=large',107.460986,1.79533800694302415846e+09);
INSERT INTO "samples" VALUES(194,7,'eval',4,0,'cand','shape=s2,cls=large,n=4096','cls=large',113.434285,1.79533800694302415846e+09);
INSERT INTO "samples" VALUES(195,7,'eval',4,0,'best','shape=s3,cls=large,n=8192','cls=large',211.970479,1.79533800694302415846e+09);
INSERT INTO "samples" VALUES(196,7,'eval',4,0,'cand','shape=s3,cls=large,n=8192','cls=large',221.08429,1.79533800694302415846e+09);
INSERT INTO "samples" VALUES(197,8,'eval',0,0,'best','shape=s0,cls=small,n=128','cls=small',9.073152,1.79533800726457834244e+09);
INSERT INTO "samples" VALUES(198,8,'eval',0,0,'cand','shape=s0,cls=small,n=128','cls=small',9.053736,1.79533800726457834244e+09);
INSERT INTO "samples" VALUES(199,8,'eval',0,0,'best','shape=s1,cls=small,n=256','cls=small',12.517184,1.79533800726457834244e+09);
INSERT INTO "samples" VALUES(200,8,'eval',0,0,'cand','shape=s1,cls=small,n=256','cls=small',12.704904,1.79533800726457834244e+09);
INSERT INTO "samples" VALUES(201,8,'eval',0,0,'best','shape=s2,cls=large,n=4096','cls=large',110.405245,1.79533800726457834244e+09);
INSERT INTO "samples" VALUES(202,8,'eval',0,0,'cand','shape=s2,cls=large,n=4096','cls=large',105.974371,1.79533800726457834244e+09);
INSERT INTO "samples" VALUES(203,8,'eval',0,0,'best','shape=s3,cls=large,n=8192','cls=large',207.726459,1.79533800726457834244e+09);
INSERT INTO "samples" VALUES(204,8,'eval',0,0,'cand','shape=s3,cls=large,n=8192','cls=large',206.231518,1.79533800726457834244e+09);
INSERT INTO "samples" VALUES(205,8,'eval',1,0,'best','shape=s0,cls=small,n=128','cls=small',8.909238,1.79533800739532351494e+09);
INSERT INTO "samples" VALUES(206,8,'eval',1,0,'cand','shape=s0,cls=small,n=128','cls=small',8.887755,1.79533800739532351494e+09);
INSERT INTO "samples" VALUES(207,8,'eval',1,0,'best','shape=s1,cls=small,n=256','cls=small',12.568974,1.79533800739532351494e+09);
INSERT INTO "samples" VALUES(208,8,'eval',1,0,'cand','shape=s1,cls=small,n=256','cls=small',12.567472,1.79533800739532351494e+09);
INSERT INTO "samples" VALUES(209,8,'eval',1,0,'best','shape=s2,cls=large,n=4096','cls=large',109.416623,1.79533800739532351494e+09);
INSERT INTO "samples" VALUES(210,8,'eval',1,0,'cand','shape=s2,cls=large,n=4096','cls=large',108.925527,1.79533800739532351494e+09);
INSERT INTO "samples" VALUES(211,8,'eval',1,0,'best','shape=s3,cls=large,n=8192','cls=large',205.761316,1.79533800739532351494e+09);
INSERT INTO "samples" VALUES(212,8,'eval',1,0,'cand','shape=s3,cls=large,n=8192','cls=large',205.505453,1.79533800739532351494e+09);
INSERT INTO "samples" VALUES(213,8,'eval',2,0,'best','shape=s0,cls=small,n=128','cls=small',9.093989,1.79533800755289721495e+09);
INSERT INTO "samples" VALUES(214,8,'eval',2,0,'cand','shape=s0,cls=small,n=128','cls=small',8.953125,1.79533800755289721495e+09);
INSERT INTO "samples" VALUES(215,8,'eval',2,0,'best','shape=s1,cls=small,n=256','cls=small',12.579735,1.79533800755289721495e+09);
INSERT INTO "samples" VALUES(216,8,'eval',2,0,'cand','shape=s1,cls=small,n=256','cls=small',12.647561,1.79533800755289721495e+09);
INSERT INTO "samples" VALUES(217,8,'eval',2,0,'best','shape=s2,cls=large,n=4096','cls=large',107.838213,1.79533800755289721495e+09);
INSERT INTO "samples" VALUES(218,8,'eval',2,0,'cand','shape=s2,cls=large,n=4096','cls=large',109.103192,1.79533800755289721495e+09);
INSERT INTO "samples" VALUES(219,8,'eval',2,0,'best','shape=s3,cls=large,n=8192','cls=large',210.07377,1.79533800755289721495e+09);
INSERT INTO "samples" VALUES(220,8,'eval',2,0,'cand','shape=s3,cls=large,n=8192','cls=large',208.548244,1.79533800755289721495e+09);
INSERT INTO "samples" VALUES(221,8,'eval',3,0,'best','shape=s0,cls=small,n=128','cls=small',9.042152,1.79533800771004676817e+09);
INSERT INTO "samples" VALUES(222,8,'eval',3,0,'cand','shape=s0,cls=small,n=128','cls=small',9.15201,1.79533800771004676817e+09);
INSERT INTO "samples" VALUES(223,8,'eval',3,0,'best','shape=s1,cls=small,n=256','cls=small',12.637602,1.79533800771004676817e+09);
INSERT INTO "samples" VALUES(224,8,'eval',3,0,'cand','shape=s1,cls=small,n=256','cls=small',12.634645,1.79533800771004676817e+09);
INSERT INTO "samples" VALUES(225,8,'eval',3,0,'best','shape=s2,cls=large,n=4096','cls=large',108.324132,1.79533800771004676817e+09);
INSERT INTO "samples" VALUES(226,8,'eval',3,0,'cand','shape=s2,cls=large,n=4096','cls=large',108.976539,1.79533800771004676817e+09);
INSERT INTO "samples" VALUES(227,8,'eval',3,0,'best','shape=s3,cls=large,n=8192','cls=large',205.683561,1.79533800771004676817e+09);
INSERT INTO "samples" VALUES(228,8,'eval',3,0,'cand','shape=s3,cls=large,n=8192','cls=large',205.051401,1.79533800771004676817e+09);
INSERT INTO "samples" VALUES(229,8,'eval',4,0,'best','shape=s0,cls=small,n=128','cls=small',9.092778,1.79533800787074947352e+09);
INSERT INTO "samples" VALUES(230,8,'eval',4,0,'cand','shape=s0,cls=small,n=128','cls=small',9.02508,1.79533800787074947352e+09);
INSERT INTO "samples" VALUES(231,8,'eval',4,0,'best','shape=s1,cls=small,n=256','cls=small',13.105407,1.79533800787074947352e+09);
INSERT INTO "samples" VALUES(232,8,'eval',4,0,'cand','shape=s1,cls=small,n=256','cls=small',12.627324,1.79533800787074947352e+09);
INSERT INTO "samples" VALUES(233,8,'eval',4,0,'best','shape=s2,cls=large,n=4096','cls=large',107.641528,1.79533800787074947352e+09);
INSERT INTO "samples" VALUES(234,8,'eval',4,0,'cand','shape=s2,cls=large,n=4096','cls=large',107.967602,1.79533800787074947352e+09);
INSERT INTO "samples" VALUES(235,8,'eval',4,0,'best','shape=s3,cls=large,n=8192','cls=large',208.589418,1.79533800787074947352e+09);
INSERT INTO "samples" VALUES(236,8,'eval',4,0,'cand','shape=s3,cls=large,n=8192','cls=large',204.776283,1.79533800787074947352e+09);
INSERT INTO "samples" VALUES(237,8,'eval',5,0,'best','shape=s0,cls=small,n=128','cls=small',8.98682,1.79533800799400472644e+09);
INSERT INTO "samples" VALUES(238,8,'eval',5,0,'cand','shape=s0,cls=small,n=128','cls=small',9.037395,1.79533800799400472644e+09);
INSERT INTO "samples" VALUES(239,8,'eval',5,0,'best','shape=s1,cls=small,n=256','cls=small',12.866487,1.79533800799400472644e+09);
INSERT INTO "samples" VALUES(240,8,'eval',5,0,'cand','shape=s1,cls=small,n=256','cls=small',12.518983,1.79533800799400472644e+09);
INSERT INTO "samples" VALUES(241,8,'eval',5,0,'best','shape=s2,cls=large,n=4096','cls=large',108.655982,1.79533800799400472644e+09);
INSERT INTO "samples" VALUES(242,8,'eval',5,0,'cand','shape=s2,cls=large,n=4096','cls=large',108.895745,1.79533800799400472644e+09);
INSERT INTO "samples" VALUES(243,8,'eval',5,0,'best','shape=s3,cls=large,n=8192','cls=large',211.365909,1.79533800799400472644e+09);
INSERT INTO "samples" VALUES(244,8,'eval',5,0,'cand','shape=s3,cls=large,n=8192','cls=large',206.959902,1.79533800799400472644e+09);
INSERT INTO "samples" VALUES(245,8,'eval',6,0,'best','shape=s0,cls=small,n=128','cls=small',8.784335,1.7953380081552762985e+09);
INSERT INTO "samples" VALUES(246,8,'eval',6,0,'cand','shape=s0,cls=small,n=128','cls=small',9.02664,1.7953380081552762985e+09);
INSERT INTO "samples" VALUES(247,8,'eval',6,0,'best','shape=s1,cls=small,n=256','cls=small',12.68017,1.7953380081552762985e+09);
INSERT INTO "samples" VALUES(248,8,'eval',6,0,'cand','shape=s1,cls=small,n=256','cls=small',12.55762,1.7953380081552762985e+09);
INSERT INTO "samples" VALUES(249,8,'eval',6,0,'best','shape=s2,cls=large,n=4096','cls=large',107.770613,1.7953380081552762985e+09);
INSERT INTO "samples" VALUES(250,8,'eval',6,0,'cand','shape=s2,cls=large,n=4096','cls=large',108.08242,1.7953380081552762985e+09);
INSERT INTO "samples" VALUES(251,8,'eval',6,0,'best','shape=s3,cls=large,n=8192','cls=large',205.491296,1.7953380081552762985e+09);
INSERT INTO "samples" VALUES(252,8,'eval',6,0,'cand','shape=s3,cls=large,n=8192','cls=large',207.360181,1.7953380081552762985e+09);
INSERT INTO "samples" VALUES(253,8,'eval',7,0,'best','shape=s0,cls=small,n=128','cls=small',9.132612,1.79533800824849224097e+09);
INSERT INTO "samples" VALUES(254,8,'eval',7,0,'cand','shape=s0,cls=small,n=128','cls=small',8.819895,1.79533800824849224097e+09);
INSERT INTO "samples" VALUES(255,8,'eval',7,0,'best','shape=s1,cls=small,n=256','cls=small',12.587122,1.79533800824849224097e+09);
INSERT INTO "samples" VALUES(256,8,'eval',7,0,'cand','shape=s1,cls=small,n=256','cls=small',12.638585,1.79533800824849224097e+09);
INSERT INTO "samples" VALUES(257,8,'eval',7,0,'best','shape=s2,cls=large,n=4096','cls=large',106.639531,1.79533800824849224097e+09);
INSERT INTO "samples" VALUES(258,8,'eval',7,0,'cand','shape=s2,cls=large,n=4096','cls=large',108.554057,1.79533800824849224097e+09);
INSERT INTO "samples" VALUES(259,8,'eval',7,0,'best','shape=s3,cls=large,n=8192','cls=large',204.755881,1.79533800824849224097e+09);
INSERT INTO "samples" VALUES(260,8,'eval',7,0,'cand','shape=s3,cls=large,n=8192','cls=large',206.895474,1.79533800824849224097e+09);
CREATE INDEX samples_by_version ON samples (version, stage);
CREATE INDEX commands_pending ON commands (status, id);
COMMIT;
