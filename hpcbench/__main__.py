from hpcbench.cli import main

raise SystemExit(main())
