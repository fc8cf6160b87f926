"""Test evaluation: generations for a checkpoint (once), scored by every scorer that asks, and the diagonal
check comparing two scorers on the same generations."""
