"""The fault harness: load, a seeded nemesis, and a history checker, runnable as one command.

``python -m bench.faults --seed 7 --rounds 10`` starts a stack of its own (a throwaway
PostgreSQL cluster when run as root, else a scratch database), drives workflows through
the SDK while the nemesis kills and pauses processes and cuts or restarts the database,
drains, checks every history, then repeats a short run with a planted bug the checker
must catch. See docs/reliability.md, "The fault harness".
"""
