"""The loop: the state machine on one page (machine.py) and its collaborators beside it
(start, control, context, proposal, measure, served_trees, evidence, keep; processes beneath
them; the run's history they read is engine/history.py). docs/architecture.md follows one
iteration through them."""
