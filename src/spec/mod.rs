//! SPEC.md: the task list, parsed with source offsets, validated, selected from and edited
//! byte for byte.
