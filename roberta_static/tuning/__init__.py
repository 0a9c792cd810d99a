"""``tune``: vectors whose weighted mean predicts the teacher's sentence vectors."""
