from openjev.cli import main

main()
