// Placeholder: the objstore component is being written.
