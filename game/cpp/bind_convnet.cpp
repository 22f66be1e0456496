// Python bindings of the network's C++ forward pass (game/cpp/convnet.h); the `cpp` backend of
// checkerzero.network.inference builds it from a checkpoint's folded weights.
#include <string>
#include <utility>
#include <vector>

#include "bind_common.h"
#include "convnet.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace cz::bind {

void bind_convnet(nb::module_& m) {
  namespace net = cz::net;
  using Floats = nb::ndarray<const float, nb::c_contig, nb::device::cpu>;
  using Planes = nb::ndarray<const float, nb::ndim<4>, nb::c_contig, nb::device::cpu>;
  using Mask = nb::ndarray<const bool, nb::ndim<2>, nb::c_contig, nb::device::cpu>;
  using Index = nb::ndarray<const int32_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
  nb::class_<net::ConvNet>(m, "ConvNet",
                           "The policy/value network's forward pass in C++ (float32), from BatchNorm-folded "
                           "weights: the cpp backend of checkerzero.network.inference.")
      .def(
          "__init__",
          [](net::ConvNet* self, int size, int in_planes, int channels, int blocks, int policy_channels,
             int value_channels, int value_hidden, const std::vector<std::pair<Floats, Floats>>& layers,
             const Index& policy_index) {
            net::Shape shape{size,           in_planes,    channels,           blocks, policy_channels,
                             value_channels, value_hidden, size * size / 2 * 4};
            std::vector<net::Layer> copied;
            for (const auto& [w, b] : layers)
              copied.push_back({std::vector<float>(w.data(), w.data() + w.size()),
                                std::vector<float>(b.data(), b.data() + b.size())});
            std::vector<int32_t> index(policy_index.data(), policy_index.data() + policy_index.size());
            try {
              new (self) net::ConvNet(shape, copied, index);
            } catch (const std::invalid_argument& e) {
              throw nb::value_error(e.what());
            }
          },
          "size"_a, "in_planes"_a, "channels"_a, "blocks"_a, "policy_channels"_a, "value_channels"_a,
          "value_hidden"_a, "layers"_a, "policy_index"_a,
          "`layers`: (weight, bias) float32 pairs, torch's shapes, in the order of game/cpp/convnet.h.")
      .def(
          "evaluate",
          [](const net::ConvNet& self, const Planes& planes, const Mask& mask) {
            const net::Shape& s = self.shape();
            const size_t n = planes.shape(0);
            if (planes.shape(1) != size_t(s.in_planes) || planes.shape(2) != size_t(s.size) ||
                planes.shape(3) != size_t(s.size))
              throw nb::value_error(("planes must be (N, " + std::to_string(s.in_planes) + ", " +
                                     std::to_string(s.size) + ", " + std::to_string(s.size) + ")")
                                        .c_str());
            if (mask.shape(0) != n || mask.shape(1) != size_t(s.num_actions))
              throw nb::value_error(
                  ("mask must be (" + std::to_string(n) + ", " + std::to_string(s.num_actions) + ") bool")
                      .c_str());
            auto* priors = new float[n * s.num_actions];
            auto* wdl = new float[n * 3];
            nb::capsule own_priors(priors, [](void* p) noexcept { delete[] static_cast<float*>(p); });
            nb::capsule own_wdl(wdl, [](void* p) noexcept { delete[] static_cast<float*>(p); });
            {
              nb::gil_scoped_release release;
              self.evaluate(planes.data(), reinterpret_cast<const uint8_t*>(mask.data()), int(n), priors,
                            wdl);
            }
            return std::make_pair(
                nb::ndarray<nb::numpy, float, nb::ndim<2>>(priors, {n, size_t(s.num_actions)}, own_priors),
                nb::ndarray<nb::numpy, float, nb::ndim<2>>(wdl, {n, 3}, own_wdl));
          },
          "planes"_a, "mask"_a,
          "(priors (N, A), wdl (N, 3)) float32 for planes (N, C, S, S) and a bool mask (N, A).")
      .def_static("kernel", &net::ConvNet::kernel,
                  "'avx2+fma' or 'portable': the copy of the forward pass a network built now runs "
                  "(CHECKERZERO_CPU_KERNEL=portable forces the portable one).")
      .def_prop_ro("runs_avx2", &net::ConvNet::avx2, "Whether this network runs the AVX2+FMA copy.");
}

}  // namespace cz::bind
