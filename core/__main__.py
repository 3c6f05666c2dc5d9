import sys

from core.run.cli import main

sys.exit(main())
