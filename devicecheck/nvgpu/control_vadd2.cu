// The control case: a hand-written kernel (not XTC code), built with nvcc -cubin and
// launched through the same libmlir_cuda_runtime entry points as XTC's kernels.
extern "C" __global__ void vadd2(const float *a, const float *b, float *c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + 2.0f * b[i];
}
