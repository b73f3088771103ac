"""Worker backends: where the controller's launch / stop / reconfigure actions become processes."""
