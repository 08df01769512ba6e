from gtui.entry import main

raise SystemExit(main())
