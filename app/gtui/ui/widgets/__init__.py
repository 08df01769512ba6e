"""The dashboard's widgets; each takes engine values (JobView, GpusRead) and paints them."""
