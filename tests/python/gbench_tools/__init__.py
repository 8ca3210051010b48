"""What Google Benchmark's own comparison tool computes, re-derived for lockline's tests."""
