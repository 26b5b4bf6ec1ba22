"""Compile TensorFlow training job specs into Kubernetes manifests."""
