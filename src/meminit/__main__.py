from meminit.cli import main

raise SystemExit(main())
