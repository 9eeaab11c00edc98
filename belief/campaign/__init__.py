"""Campaigns: the closed loop, its log, replay, many campaigns, the synthetic and manual worlds,
and calibration against the synthetic world's truth."""
