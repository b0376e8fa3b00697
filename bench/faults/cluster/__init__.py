"""The cross-host fault run: faults on the hosts of ``make cluster``, under load, then checked.

``python -m bench.faults.cluster --seed 7 --rounds 5`` runs against the cluster that is up
(``make cluster``; it brings one up, and down again, when none is), drives workflows
through HAProxy with the fault harness's load generator and ledger
(:mod:`bench.faults.load`), and injects, in a seeded order, each fault ``--rounds``
times: the PostgreSQL primary's host killed, the primary cut off by nftables, a shard
owner cut off from PostgreSQL, a frontend host killed mid-request, the worker host killed
mid-activity (:mod:`bench.faults.cluster.nemesis`). After each it repairs the cluster and
waits until it is whole. Then it drains the load and runs the fault harness's history
checker (:mod:`bench.faults.checker`): nothing lost, nothing applied twice, every
history replays, every timer fired once, range_id never went down. The table gives per
fault the operations accepted, lost and duplicated, and how long the service and the
timers stood still (:mod:`bench.faults.cluster.report`). See platform/README.md, "A
cluster on one machine".
"""
