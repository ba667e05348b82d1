"""`python -m rocm_validate.collectives`: one rank of a collectives world (see rank.py)."""

from rocm_validate.collectives.rank import main

raise SystemExit(main())
