// Placeholder: the capsule component is being written.
