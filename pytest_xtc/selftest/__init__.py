"""The suite's proof of power: deliberately faulty host variants, all of which must be
rejected while the real host passes."""
