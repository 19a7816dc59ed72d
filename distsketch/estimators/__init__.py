"""scikit-learn-style estimators composed of ops + summaries."""
