#!/bin/sh
# The self-test of the layering check (tests/layers.sh --self-test) as a
# test of its own, since make check runs a test without arguments: a small
# synthetic tree passes, and each way of breaking it fails with its message.
exec bash "$(dirname "$0")/layers.sh" --self-test
