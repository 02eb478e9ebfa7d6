"""The commands: the top layer, turning command lines into requests for the layers below."""
