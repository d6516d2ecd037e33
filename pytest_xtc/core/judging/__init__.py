"""Whether a result is right: the float64 reference, each op's error bound, the element-wise
comparison and the precision measure. Reads cases; knows nothing of how they ran."""
