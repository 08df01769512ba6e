from gtui.cli import main

raise SystemExit(main())
