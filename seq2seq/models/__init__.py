"""Models: tensors in, tensors out. Nothing here reads files, configs or logs."""
