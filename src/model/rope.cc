#include "model/rope.h"

#include <cmath>
#include <numbers>

namespace evt::model {

std::vector<float> rope_inv_freq(const ModelConfig& config) {
  const int64_t dim = config.head_dim;
  std::vector<float> out;
  out.reserve(dim / 2);
  for (int64_t i = 0; i < dim; i += 2) {
    double inv_freq = 1.0 / std::pow(config.rope_theta, double(i) / double(dim));
    if (const auto& s = config.rope_scaling) {
      // Wavelengths shorter than original_context / high_freq_factor stay as they are; longer
      // than original_context / low_freq_factor are stretched by `factor`; those in between
      // interpolate linearly in original_context / wavelength.
      const double old_context = double(s->original_max_position_embeddings);
      const double low_freq_wavelen = old_context / s->low_freq_factor;
      const double high_freq_wavelen = old_context / s->high_freq_factor;
      const double wavelen = 2 * std::numbers::pi / inv_freq;
      if (wavelen > low_freq_wavelen) {
        inv_freq /= s->factor;
      } else if (!(wavelen < high_freq_wavelen)) {
        const double smooth =
            (old_context / wavelen - s->low_freq_factor) / (s->high_freq_factor - s->low_freq_factor);
        inv_freq = (1 - smooth) * inv_freq / s->factor + smooth * inv_freq;
      }
    }
    out.push_back(static_cast<float>(inv_freq));
  }
  return out;
}

}  // namespace evt::model
