// Fused row-wise RMSNorm and LayerNorm, forward and backward, for CPU.
//
// One row of x (the last dimension, width N) is normalized at a time; rows are
// spread over torch's intra-op threads (at::parallel_for, i.e. OpenMP in the
// stock build, so torch.set_num_threads applies and only one OpenMP runtime is
// loaded). A row is a few KB, so after the first touch every further pass over
// it hits L1: the passes below cost arithmetic, not memory traffic.
//
// Precision: the statistics (mean, mean square, the backward's row sums) are
// accumulated in acc_t = float for float and bfloat16 input, double for double
// input. The output and dx are in the input dtype; rstd (and mean) are saved
// in acc_t; the kernels take weight and bias in acc_t and return their gradients
// in it (FusedNorm, the autograd function at the end, does the casting).
//
//   rmsnorm:   y = x·r·w + b,          r = 1/sqrt(mean(x²) + eps)
//   layernorm: y = (x − μ)·r·w + b,    r = 1/sqrt(mean((x − μ)²) + eps)
//
// Backward, with x̂ the normalized row and g = dy·w:
//   rmsnorm:   dx = r·(g − x̂·mean(g·x̂))
//   layernorm: dx = r·(g − mean(g) − x̂·mean(g·x̂))
//   dw = Σ_rows dy·x̂,  db = Σ_rows dy   (each chunk of rows sums into its own
//   buffer; the buffers are added at the end, so no atomics and a result that
//   does not depend on thread scheduling).
//
// Inner loops are `#pragma omp simd` so that gcc vectorizes the reductions
// (it may not reorder a float sum otherwise); built with -O3 -march=native.
#include <torch/extension.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <tuple>
#include <vector>

namespace {

template <typename T> struct AccOf { using type = float; };
template <> struct AccOf<double> { using type = double; };

// bf16 -> fp32 is a 16-bit shift; written out so gcc vectorizes it.
template <typename T, typename A> inline A load(const T* p, int64_t j) { return static_cast<A>(p[j]); }
template <> inline float load<c10::BFloat16, float>(const c10::BFloat16* p, int64_t j) {
  uint32_t bits = static_cast<uint32_t>(p[j].x) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// fp32 -> bf16, round to nearest even (NaN stays NaN: the rounding carry cannot reach
// the sign bit, and a quiet NaN keeps a mantissa bit set).
template <typename T, typename A> inline void store(T* p, int64_t j, A v) { p[j] = static_cast<T>(v); }
template <> inline void store<c10::BFloat16, float>(c10::BFloat16* p, int64_t j, float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  uint32_t rounded = bits + 0x7FFFu + ((bits >> 16) & 1u);
  bool nan = (bits & 0x7FFFFFFFu) > 0x7F800000u;
  p[j].x = static_cast<uint16_t>(nan ? ((bits >> 16) | 0x40u) : (rounded >> 16));
}

// Rows [0, M) cut into `chunks` contiguous ranges; chunk c is rows [lo, hi).
inline std::pair<int64_t, int64_t> chunk_rows(int64_t M, int64_t chunks, int64_t c) {
  int64_t per = (M + chunks - 1) / chunks;
  return {std::min(M, c * per), std::min(M, (c + 1) * per)};
}

// Enough rows per chunk that the thread start-up (a few µs) is paid for.
inline int64_t num_chunks(int64_t M, int64_t N) {
  int64_t min_rows = std::max<int64_t>(1, 16384 / std::max<int64_t>(N, 1));
  return std::max<int64_t>(1, std::min<int64_t>(at::get_num_threads(), (M + min_rows - 1) / min_rows));
}

// weight (or ones) and bias (or zeros) as contiguous acc_t vectors of width N.
template <typename A>
std::pair<at::Tensor, at::Tensor> affine_or_identity(const std::optional<at::Tensor>& w,
                                                     const std::optional<at::Tensor>& b,
                                                     int64_t N, at::ScalarType acc) {
  auto opts = at::TensorOptions().dtype(acc);
  at::Tensor wt = w.has_value() ? w->contiguous() : at::ones({N}, opts);
  at::Tensor bt = b.has_value() ? b->contiguous() : at::zeros({N}, opts);
  TORCH_CHECK(wt.scalar_type() == acc && bt.scalar_type() == acc, "weight/bias must be ", acc);
  TORCH_CHECK(wt.numel() == N && bt.numel() == N, "weight/bias must have ", N, " elements");
  return {wt, bt};
}

// Σ_j term(j) over a row with kLanes independent partial sums: one accumulator would
// make every vector add wait for the previous one (4 cycles); several keep the FMA
// units busy, and the sum is more accurate too (pairwise-like).
constexpr int64_t kLanes = 32;

// The lanes folded in halves (5 vector adds), not one after another (32 dependent adds,
// as long as the whole loop over a 128-wide row).
template <typename A>
inline A fold_lanes(A* lane) {
  for (int64_t width = kLanes / 2; width > 0; width /= 2) {
#pragma omp simd
    for (int64_t k = 0; k < width; ++k) lane[k] += lane[k + width];
  }
  return lane[0];
}

template <typename A, typename F>
inline A lane_sum(int64_t N, const F& term) {
  A lane[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= N; j += kLanes) {
#pragma omp simd
    for (int64_t k = 0; k < kLanes; ++k) lane[k] += term(j + k);
  }
  A s = 0;
  for (; j < N; ++j) s += term(j);
  return s + fold_lanes(lane);
}

// ----------------------------------------------------------------------------- forward

template <typename T, bool CENTER>
void norm_forward_rows(const T* x, const typename AccOf<T>::type* w, const typename AccOf<T>::type* b,
                       T* y, typename AccOf<T>::type* mean_out, typename AccOf<T>::type* rstd_out,
                       int64_t M, int64_t N, double eps) {
  using A = typename AccOf<T>::type;
  at::parallel_for(0, M, std::max<int64_t>(1, 16384 / std::max<int64_t>(N, 1)), [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      const T* xr = x + i * N;
      T* yr = y + i * N;
      // two passes over the cached row for layernorm: no E[x²] − E[x]² cancellation
      const A mu = CENTER ? lane_sum<A>(N, [&](int64_t j) { return load<T, A>(xr, j); }) / N : A(0);
      const A ss = lane_sum<A>(N, [&](int64_t j) { A d = load<T, A>(xr, j) - mu; return d * d; });
      const A r = A(1) / std::sqrt(ss / N + static_cast<A>(eps));
#pragma omp simd
      for (int64_t j = 0; j < N; ++j) store<T, A>(yr, j, (load<T, A>(xr, j) - mu) * r * w[j] + b[j]);
      if (CENTER) mean_out[i] = mu;
      rstd_out[i] = r;
    }
  });
}

// (y, mean, rstd); mean is an empty tensor for rmsnorm.
std::vector<at::Tensor> norm_forward(const at::Tensor& x_in, const std::optional<at::Tensor>& weight,
                                     const std::optional<at::Tensor>& bias, double eps, bool center) {
  TORCH_CHECK(x_in.device().is_cpu(), "normlab fused norms run on CPU");
  TORCH_CHECK(x_in.dim() == 2, "expected a 2-d (rows, width) input");
  at::Tensor x = x_in.contiguous();
  const int64_t M = x.size(0), N = x.size(1);
  at::ScalarType acc = x.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  at::Tensor y = at::empty_like(x);
  at::Tensor rstd = at::empty({M}, x.options().dtype(acc));
  at::Tensor mean = at::empty({center ? M : 0}, x.options().dtype(acc));
  AT_DISPATCH_FLOATING_TYPES_AND(at::kBFloat16, x.scalar_type(), "normlab_norm_forward", [&] {
    using A = typename AccOf<scalar_t>::type;
    auto [w, b] = affine_or_identity<A>(weight, bias, N, acc);
    if (center)
      norm_forward_rows<scalar_t, true>(x.data_ptr<scalar_t>(), w.data_ptr<A>(), b.data_ptr<A>(),
                                        y.data_ptr<scalar_t>(), mean.data_ptr<A>(), rstd.data_ptr<A>(), M, N, eps);
    else
      norm_forward_rows<scalar_t, false>(x.data_ptr<scalar_t>(), w.data_ptr<A>(), b.data_ptr<A>(),
                                         y.data_ptr<scalar_t>(), nullptr, rstd.data_ptr<A>(), M, N, eps);
  });
  return {y, mean, rstd};
}

// ----------------------------------------------------------------------------- backward

// One chunk of rows: dx for each row, and this chunk's partial dw (and db if BIAS).
template <typename T, bool CENTER, bool BIAS>
void norm_backward_chunk(const T* dy, const T* x, const typename AccOf<T>::type* w,
                         const typename AccOf<T>::type* mean, const typename AccOf<T>::type* rstd,
                         T* dx, typename AccOf<T>::type* dw, typename AccOf<T>::type* db,
                         int64_t lo, int64_t hi, int64_t N) {
  using A = typename AccOf<T>::type;
  for (int64_t i = lo; i < hi; ++i) {
    const T* gr = dy + i * N;
    const T* xr = x + i * N;
    const A mu = CENTER ? mean[i] : A(0), r = rstd[i];
    // pass 1: Σ g and Σ g·x̂ (g = dy·w) in kLanes partial sums, and the dw, db rows
    A lane_g[kLanes] = {}, lane_gx[kLanes] = {};
    int64_t j0 = 0;
    auto body = [&](int64_t j, A& sg, A& sgx) {
      A go = load<T, A>(gr, j), xh = (load<T, A>(xr, j) - mu) * r, g = go * w[j];
      if (CENTER) sg += g;
      sgx += g * xh;
      dw[j] += go * xh;
      if (BIAS) db[j] += go;
    };
    for (; j0 + kLanes <= N; j0 += kLanes) {
#pragma omp simd
      for (int64_t k = 0; k < kLanes; ++k) body(j0 + k, lane_g[k], lane_gx[k]);
    }
    A sum_g = 0, sum_gx = 0;
    for (int64_t j = j0; j < N; ++j) body(j, sum_g, sum_gx);
    sum_g += fold_lanes(lane_g);
    sum_gx += fold_lanes(lane_gx);
    // pass 2: dx = r·(g − mean(g) − x̂·mean(g·x̂)), the row still in L1
    const A c1 = CENTER ? sum_g / N : A(0), c2 = sum_gx / N;
    T* dxr = dx + i * N;
#pragma omp simd
    for (int64_t j = 0; j < N; ++j) {
      A xh = (load<T, A>(xr, j) - mu) * r;
      store<T, A>(dxr, j, r * (load<T, A>(gr, j) * w[j] - c1 - xh * c2));
    }
  }
}

template <typename T>
void norm_backward_chunk(bool center, bool bias, const T* dy, const T* x, const typename AccOf<T>::type* w,
                         const typename AccOf<T>::type* mean, const typename AccOf<T>::type* rstd, T* dx,
                         typename AccOf<T>::type* dw, typename AccOf<T>::type* db, int64_t lo, int64_t hi, int64_t N) {
  if (center && bias) norm_backward_chunk<T, true, true>(dy, x, w, mean, rstd, dx, dw, db, lo, hi, N);
  else if (center) norm_backward_chunk<T, true, false>(dy, x, w, mean, rstd, dx, dw, db, lo, hi, N);
  else if (bias) norm_backward_chunk<T, false, true>(dy, x, w, mean, rstd, dx, dw, db, lo, hi, N);
  else norm_backward_chunk<T, false, false>(dy, x, w, mean, rstd, dx, dw, db, lo, hi, N);
}

// (dx, dw, db): dw, db summed over all rows in acc_t; db only if `bias` (else empty).
std::vector<at::Tensor> norm_backward(const at::Tensor& dy_in, const at::Tensor& x,
                                      const std::optional<at::Tensor>& weight, const at::Tensor& mean,
                                      const at::Tensor& rstd, bool center, bool bias) {
  TORCH_CHECK(x.is_contiguous() && x.dim() == 2, "x must be the contiguous 2-d input saved by forward");
  at::Tensor dy = dy_in.contiguous().to(x.scalar_type());
  const int64_t M = x.size(0), N = x.size(1);
  at::ScalarType acc = rstd.scalar_type();
  at::Tensor dx = at::empty_like(x);
  const int64_t chunks = num_chunks(M, N);
  // Each chunk's [dw; db] in a block of its own, rounded up to 32 elements (>= 128 bytes):
  // no cache line (or prefetched line pair) is shared between threads. (dw of all chunks
  // side by side, then db, made the bias backward 1.5x slower on 2 threads.)
  const int64_t parts = bias ? 2 : 1, block = (parts * N + 31) / 32 * 32;
  at::Tensor partial = at::zeros({chunks, block}, x.options().dtype(acc));
  AT_DISPATCH_FLOATING_TYPES_AND(at::kBFloat16, x.scalar_type(), "normlab_norm_backward", [&] {
    using A = typename AccOf<scalar_t>::type;
    auto [w, unused] = affine_or_identity<A>(weight, std::nullopt, N, acc);
    const scalar_t *dyp = dy.data_ptr<scalar_t>(), *xp = x.data_ptr<scalar_t>();
    const A *wp = w.data_ptr<A>(), *rp = rstd.data_ptr<A>(), *mp = center ? mean.data_ptr<A>() : nullptr;
    scalar_t* dxp = dx.data_ptr<scalar_t>();
    A* dwp = partial.data_ptr<A>();
    at::parallel_for(0, chunks, 1, [&](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; ++c) {
        auto [lo, hi] = chunk_rows(M, chunks, c);
        A* dw = dwp + c * block;
        norm_backward_chunk<scalar_t>(center, bias, dyp, xp, wp, mp, rp, dxp, dw, bias ? dw + N : nullptr, lo, hi, N);
      }
    });
  });
  at::Tensor sums = partial.sum(0);  // chunks are few: a tiny reduction
  return {dx, sums.narrow(0, 0, N), bias ? sums.narrow(0, N, N) : at::Tensor()};
}

// ----------------------------------------------------------------------------- autograd

// The autograd function in C++, not Python: a Python torch.autograd.Function costs ~25 µs
// per forward+backward, as much as the kernels themselves at nanoGPT's (768, 128).
// x (any shape, normalized over the last dim), weight, bias in any float dtype: weight and
// bias are used in acc_t (the engine casts their gradients back to their own dtype).
struct FusedNorm : public torch::autograd::Function<FusedNorm> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x,
                            const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
                            double eps, bool center) {
    TORCH_CHECK(x.dim() >= 1 && x.size(-1) > 0, "expected a non-empty last dimension");
    at::ScalarType acc = x.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
    std::optional<at::Tensor> w, b;
    if (weight.has_value()) w = weight->to(acc);
    if (bias.has_value()) b = bias->to(acc);
    at::Tensor x2 = x.reshape({-1, x.size(-1)}).contiguous();  // a view when x is contiguous
    auto out = norm_forward(x2, w, b, eps, center);
    ctx->save_for_backward({x2, w.value_or(at::Tensor()), out[1], out[2]});
    ctx->saved_data["center"] = center;
    ctx->saved_data["has_weight"] = w.has_value();
    ctx->saved_data["has_bias"] = b.has_value();
    return out[0].view(x.sizes());
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    TORCH_CHECK(!at::GradMode::is_enabled(), "normlab's fused norms have no double backward");
    auto saved = ctx->get_saved_variables();
    const at::Tensor &x2 = saved[0], &w = saved[1], &mean = saved[2], &rstd = saved[3];
    // needs_input_grad counts tensor inputs only: an absent weight has no index
    const bool has_w = ctx->saved_data["has_weight"].toBool(), has_b = ctx->saved_data["has_bias"].toBool();
    const bool need_w = has_w && ctx->needs_input_grad(1), need_b = has_b && ctx->needs_input_grad(has_w ? 2 : 1);
    auto g = norm_backward(grads[0].reshape(x2.sizes()), x2, w.defined() ? std::optional<at::Tensor>(w) : std::nullopt,
                           mean, rstd, ctx->saved_data["center"].toBool(), need_b);
    return {g[0].view(grads[0].sizes()), need_w ? g[1] : at::Tensor(), need_b ? g[2] : at::Tensor(),
            at::Tensor(), at::Tensor()};
  }
};

at::Tensor fused_norm(const at::Tensor& x, const std::optional<at::Tensor>& weight,
                      const std::optional<at::Tensor>& bias, double eps, bool center) {
  return FusedNorm::apply(x, weight, bias, eps, center);
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("fused_norm", &fused_norm, "rmsnorm (center=False) / layernorm (center=True) over the last dim, with autograd",
        py::arg("x"), py::arg("weight"), py::arg("bias"), py::arg("eps"), py::arg("center"));
  m.def("forward", &norm_forward, "the forward kernel on a 2-d input: (y, mean, rstd)",
        py::arg("x"), py::arg("weight"), py::arg("bias"), py::arg("eps"), py::arg("center"));
  m.def("backward", &norm_backward, "the backward kernel: (dx, dweight, dbias)",
        py::arg("dy"), py::arg("x"), py::arg("weight"), py::arg("mean"), py::arg("rstd"), py::arg("center"),
        py::arg("bias"));
}
