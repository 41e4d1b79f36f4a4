from maskrcnn_launcher.cli import main

main()
