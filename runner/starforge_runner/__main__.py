"""`python3 -m starforge_runner` (from a source checkout) behaves like the zipapp."""

import sys

from starforge_runner.cli import main

sys.exit(main())
