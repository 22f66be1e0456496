// The policy/value network's forward pass on a CPU, in C++ (float32): the `cpp` backend of
// checkerzero.network.inference, made for the small batches a timed player's search sends.
//
// The network is checkerzero.network.model.CheckersNet with every BatchNorm folded into the
// convolution before it (inference.fold_batchnorm): a 3x3 stem, `blocks` residual blocks of two
// 3x3 convolutions, a policy head of two 1x1 convolutions read at the playable cells, and a value
// head of a 1x1 convolution and two dense layers ending in win/draw/loss logits. The outputs are
// what NetworkEvaluator.evaluate returns: priors softmaxed over the legal actions only (exactly 0
// on illegal ones) and WDL probabilities.
//
// Why it is faster than torch at the batches a search sends: one call runs the whole network
// without dispatching operators, positions one after another through cache-resident buffers.
// Activations are kept cell-major with the channels contiguous ([cell][channel], the grid padded
// by a zero border), so every kernel works on 8-wide vectors across channels. The 3x3
// convolutions run as Winograd F(2x2, 3x3) (Lavin and Gray, 2016): each 4x4 input tile is
// transformed once, a 2x2 output tile then costs 16 products per channel pair instead of 36, and
// those are 16 small matrix products (tiles x in) by (in x out), each row of weights loaded once
// for three or four tiles. On x86-64 a copy of the code compiled for AVX2+FMA is chosen at run
// time when the CPU has them (the package itself is built for x86-64-v2); elsewhere the portable
// copy runs, correct but many times slower (its 8-wide vectors split into narrower ones), so the
// backend's `auto` chooses torch's jit graph on such CPUs (inference.auto_cpu_backend).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace cz::net {

// The network's shape (the fields of ModelConfig that the forward pass reads).
struct Shape {
  int size = 8;             // board side S
  int in_planes = 0;        // input planes
  int channels = 0;         // tower width C
  int blocks = 0;           // residual blocks
  int policy_channels = 0;  // the policy head's hidden 1x1 width
  int value_channels = 0;   // the value head's 1x1 width
  int value_hidden = 0;     // the value head's dense width
  int num_actions = 0;      // S*S/2 squares x 4 directions
};

// Weights as torch holds them after folding (row-major float32; a conv's weight is
// [out][in][k][k], a dense layer's [out][in]), in this order:
//   stem, then per block conv1 and conv2, policy 1x1 (C -> P), policy 1x1 (P -> 4),
//   value 1x1 (C -> V), value dense (V*S*S -> H), value dense (H -> 3);
// every layer has a bias. `policy_index[a]` is the flat index dir * S*S + row * S + col of
// action a's logit in the (4, S, S) map (model.policy_gather_index).
struct Layer {
  std::vector<float> weight;
  std::vector<float> bias;
};

class ConvNet {
 public:
  // Throws std::invalid_argument naming the first fault: a shape out of range, a layer count or
  // an array length that does not fit the shape, a non-finite weight, a policy index out of range.
  ConvNet(const Shape& shape, const std::vector<Layer>& layers, const std::vector<int32_t>& policy_index);

  // `n` positions: planes [n][in_planes][S][S], mask [n][num_actions] (0/1) in; priors
  // [n][num_actions] and wdl [n][3] out. Thread-safe (scratch buffers are per call).
  void evaluate(const float* planes, const uint8_t* mask, int n, float* priors, float* wdl) const;

  const Shape& shape() const { return shape_; }
  // "avx2+fma" or "portable": the copy of the code a network built now runs on this CPU. The
  // environment variable CHECKERZERO_CPU_KERNEL=portable forces the portable one (to check it).
  static std::string kernel();
  bool avx2() const { return avx2_; }

 private:
  struct Conv {            // a 1x1 convolution, repacked
    std::vector<float> w;  // [in][out_stride]
    std::vector<float> b;  // [out_stride]
  };
  struct Winograd {        // a 3x3 convolution in the Winograd domain
    std::vector<float> u;  // [(tile+2)^2][in][out_stride]: G g G^T of each (out, in) kernel
    std::vector<float> b;  // [out_stride]
  };
  Shape shape_;
  bool avx2_ = false;      // runs run_avx2
  int tile_ = 2;           // Winograd output tile: 4 (F(4x4, 3x3)) where the side allows, else 2
  int in_stride_ = 0;      // input planes, padded to a multiple of 8
  int stride_ = 0;         // channels of a tower buffer, padded to a multiple of 16
  int policy_stride_ = 0;  // policy hidden width, padded to 8
  int value_stride_ = 0;   // value 1x1 width, padded to 8
  int hidden_stride_ = 0;  // value dense width, padded to 8
  Winograd stem_;
  std::vector<Winograd> tower_;        // 2 per block
  Conv policy1_;                       // 1x1, C -> P
  std::vector<float> policy2_w_;       // [P][8], directions 0-3 used
  std::vector<float> policy2_b_;       // [8]
  Conv value1_;                        // 1x1, C -> V
  std::vector<float> fc1_w_;           // [V*S*S (NCHW order)][hidden_stride]
  std::vector<float> fc1_b_;           // [hidden_stride]
  std::vector<float> fc2_w_;           // [3][H]
  std::vector<float> fc2_b_;           // [3]
  std::vector<int32_t> playable_;      // the cells the policy head is read at, each once
  std::vector<int32_t> policy_logit_;  // per action: its logit among the playable cells' (slot * 8 + dir)

  void forward(const float* planes, const uint8_t* mask, int n, float* priors, float* wdl) const;
  void run_avx2(const float* planes, const uint8_t* mask, int n, float* priors, float* wdl) const;
  void run_portable(const float* planes, const uint8_t* mask, int n, float* priors, float* wdl) const;
};

}  // namespace cz::net
