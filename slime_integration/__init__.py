"""Drop-in tracking for slime: parser options, role args, collectors and the tracking drop-ins."""
