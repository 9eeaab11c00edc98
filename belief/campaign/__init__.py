"""Campaigns: the closed loop, its log, replay, many campaigns, the synthetic and manual worlds
(the calibration harness and the clairvoyant limit are in :mod:`belief.lab`)."""
