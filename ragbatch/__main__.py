from ragbatch.cli import main

main()
