"""The file formats vectors are written in and read from."""
