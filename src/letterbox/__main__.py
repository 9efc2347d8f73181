from letterbox.cli import main

main()
