from chartrl.cli import main

raise SystemExit(main())
