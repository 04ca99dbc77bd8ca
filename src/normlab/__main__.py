from normlab.cli import main

main()
