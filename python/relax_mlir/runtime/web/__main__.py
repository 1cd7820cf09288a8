from relax_mlir.runtime.web import main

raise SystemExit(main())
