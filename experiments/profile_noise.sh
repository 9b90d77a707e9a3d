#!/usr/bin/env bash
# On the device (carry .whl): bash experiments/profile_noise.sh  (experiments/profile_noise.py says what it measures)
exec bash "$(dirname "$0")/profile_cost.sh" profile_noise
