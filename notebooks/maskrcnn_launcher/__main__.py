from maskrcnn_launcher.cli.main import main

main()
