import sys

from cacheproxy.cli import main

sys.exit(main())
