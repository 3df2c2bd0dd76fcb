"""What named techniques do, in the words people search with.

Code names a block after its technique (``LayerScale``, ``SqueezeExcitation``, ``ChebConv``,
``FocalLoss``) and its docstring, when there is one, cites a paper; people ask for what it does
("scale the residual branch by a learnable per-channel vector"). Each entry here is a textbook
definition of one technique, keyed by the words its class names spell (``split_words``), and goes
into the block's text views beside the name, so both the lexical and the dense side can meet a
question that never names the technique.

A key matches a run of whole words of the class name (or of a spelled-out abbreviation, ``se``
-> ``squeeze excitation``), compared without spaces, so ``relu 6`` finds ``ReLU6`` (``re lu 6``)
and ``resnest`` finds ``ResNeSt``; the longest key that matches wins a place first, at most
``_MAX_MATCHES`` definitions per block. Entries describe techniques, never particular classes.

Definitions spell out the words a question uses ("queries, keys and values", "two fully connected
layers", "convolution") rather than the shorthand of code and papers (Q/K/V, FC-ReLU-FC, conv): the
embedder does not read ``FC`` as "fully connected", and a squeeze-and-excitation block written in
that shorthand ranked below 50 for a question describing it.
"""

from __future__ import annotations

import functools

from .abbreviations import ABBREVIATIONS

_MAX_MATCHES = 2

# (keys, definition): keys are word sequences as ``split_words`` spells class names.
_ENTRIES: list[tuple[tuple[str, ...], str]] = [
    # -- normalisation -----------------------------------------------------------------------
    (("batch norm", "batch normalization", "bn"), "normalises each channel with statistics over the batch and spatial positions, then a learned scale and shift"),
    (("sync batch norm", "sync bn"), "synchronised BatchNorm: statistics gathered over every GPU or process in data-parallel training"),
    (("frozen batch norm",), "batch normalisation with fixed statistics and affine parameters that are not trained"),
    (("layer norm", "layer normalization"), "LayerNorm: per-sample standardisation across the hidden features with an affine gain and bias"),
    (("layer norm 2d", "layer norm channels first", "layer norm channel", "conv next layer norm"), "LayerNorm for NCHW tensors: statistics taken across channels at every pixel"),
    (("group norm", "group normalization"), "GroupNorm: channels split into groups, each standardised per sample; works with tiny batches"),
    (("instance norm",), "InstanceNorm: per-sample, per-channel standardisation across height and width, as in style transfer"),
    (("rms norm",),"RMSNorm: divides activations by their root-mean-square, then a learned weight; no centring"),
    (("local response norm", "cross map lrn", "lrn"), "LRN (AlexNet): lateral inhibition dividing each response by a sum of squares over adjacent feature maps"),
    (("std conv", "weight standardization", "ws conv", "scaled std conv"), "weight-standardised convolution (WS): kernel weights centred and scaled per filter before use, pairs with GroupNorm"),
    (("ada layer norm", "adaptive layer norm", "ada ln", "ada group norm", "ada norm"), "adaptive normalisation (AdaLN, FiLM-style modulation): gain and bias produced by a network from a condition such as a timestep or label"),
    (("spectral norm",), "spectral normalisation: divides the weight by its largest singular value estimated by power iteration"),
    (("weight norm",), "weight normalisation: reparameterises the weight as a direction times a learned magnitude"),
    (("filter response norm", "frn"), "filter response normalisation: divides by the mean square over spatial positions, with a thresholded linear unit"),
    (("evo norm",), "EvoNorm: a normalisation and activation layer found by search, mixing batch and group statistics with a sigmoid"),
    (("l 2 norm", "l2 norm"), "scales vectors to unit length (L2 normalisation)"),
    (("scale norm",), "normalises by the vector norm with a single learned scale"),
    # -- activations -------------------------------------------------------------------------
    (("relu",), "rectified linear unit: max(0, x)"),
    (("leaky relu",), "leaky rectified linear unit with a small slope for negative inputs"),
    (("prelu",), "parametric rectified linear unit with a learned slope for negative inputs"),
    (("relu 6",), "rectified linear unit clipped at six"),
    (("relu squared", "squared relu", "relu square"), "squared rectified linear unit: the output of ReLU squared, as in Primer"),
    (("gelu",), "GELU: input weighted by the Gaussian CDF, Phi(x) * x"),
    (("gelu tanh", "new gelu", "fast gelu", "gelu pytorch tanh", "approximate gelu"), "GELU computed with the tanh approximation 0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3)))"),
    (("quick gelu",), "GELU approximated as x times sigmoid(1.702x)"),
    (("silu", "swish"), "sigmoid-weighted linear unit: x times sigmoid(x)"),
    (("hard swish", "hardswish", "h swish"), "h-swish (MobileNetV3): x * relu6(x + 3) / 6, a cheap stand-in for swish"),
    (("hard sigmoid", "hardsigmoid", "h sigmoid"), "hard sigmoid: cheap clipped linear stand-in for the logistic function, relu6(x + 3) / 6"),
    (("mish",), "Mish: x times tanh(softplus(x)), a smooth self-regularised activation"),
    (("elu",), "exponential linear unit"),
    (("selu",), "scaled exponential linear unit for self-normalising networks"),
    (("glu",), "gated linear unit: one half of the features gates the other half through a sigmoid"),
    (("swi glu", "swiglu", "glu mlp", "gated mlp", "ge glu", "geglu"), "GLU-variant MLP (SwiGLU, GEGLU): gate branch through SiLU or GELU multiplied with an up branch, then down-projected"),
    (("softplus",), "softplus: a smooth approximation of ReLU, log(1 + exp(x))"),
    (("star relu",), "StarReLU: a scaled and shifted squared ReLU with learned scale and bias"),
    (("snake",), "snake activation: x plus sin squared of a learned frequency times x, for periodic signals such as audio"),
    (("soft max",), "softmax over a dimension"),
    # -- attention and token mixing ----------------------------------------------------------
    (("multi head attention", "multihead attention"), "MHA: scaled dot-product attention run in parallel heads, outputs concatenated and projected"),
    (("cross attention", "cross attn"), "cross-attention (encoder-decoder attention): queries from the current stream, keys and values taken from a context such as encoder states or conditioning"),
    (("window attention",), "W-MSA: attention computed only within M x M tiles of a feature map, plus a relative bias table"),
    (("swin", "shifted window"), "Swin transformer: windowed self-attention alternating regular and shifted windows, hierarchical stages with patch merging"),
    (("multi query attention", "mqa"), "MQA: many query heads, one shared key/value head, smaller key-value cache"),
    (("grouped query attention", "gqa"), "GQA: query heads partitioned into groups, one key/value head per group (Llama 2/3, Mistral)"),
    (("linear attention", "efficient attention"), "attention with linear cost in sequence length via kernel feature maps instead of the softmax over all pairs"),
    (("lsh self attention", "lsh attention", "reformer"), "locality-sensitive hashing attention (Reformer): queries and keys hashed into buckets, attention only within buckets"),
    (("longformer",), "Longformer: local windowed attention combined with task-specific global attention tokens, linear in length"),
    (("block sparse attention", "big bird"), "BigBird block-sparse attention: sliding window, global and random blocks for long sequences"),
    (("disentangled self attention", "disentangled attention", "deberta"), "DeBERTa disentangled attention: content and relative-position vectors scored against each other in separate terms"),
    (("t 5 attention", "t5 attention", "mt 5 attention", "umt 5 attention"),"T5 attention: per-head bias from log-spaced relative-distance buckets added to logits"),
    (("relative position bias", "rel pos bias", "rel pos", "relative positional"),"relative position bias: per-head learned scalars indexed by pairwise token offset, added to logits"),
    (("axial attention",), "axial attention: attention along one spatial axis at a time"),
    (("deformable attention", "ms deform attn", "multi scale deformable attention"), "deformable attention: each query attends to a few sampling points around a reference with learned offsets, over several feature levels"),
    (("class attn", "class attention", "talking head"), "CaiT class attention: a CLS token gathers information from frozen patch embeddings in the final blocks"),
    (("attention pool", "attention pool 2d", "attention pool latent", "attention pooling"), "attention pooling: a learned query (or the mean token) attends over spatial tokens to produce one pooled vector"),
    (("perceiver resampler", "resampler"), "Perceiver resampler (Flamingo): a small set of trainable latent vectors attends to a variable number of visual features, giving a fixed-length output"),
    (("q former", "qformer"),"Q-Former (BLIP-2): trainable query embeddings read frozen vision features via cross-attention"),
    (("non local",), "non-local block: self-attention over all spatial positions of a feature map, added as a residual"),
    (("global context", "gc block"), "global context block: attention pooling over all positions, a bottleneck transform, added to every position"),
    (("squeeze excitation", "squeeze excite", "se module", "se block", "se layer"), "squeeze-and-excitation (SENet): global average pool per channel, a bottleneck of two fully connected layers with ReLU between, sigmoid, channel-wise rescale"),
    (("eca", "eca module", "ceca", "efficient channel attention"), "efficient channel attention (ECA): a small 1D convolution across the globally pooled channel descriptor gives sigmoid channel weights, without dimensionality reduction"),
    (("cbam",), "CBAM: sequential channel and spatial attention modules refining a feature map"),
    (("selective kernel", "sk conv"), "SKNet selective kernel: multi-branch convolutions of different kernel size combined with softmax attention across branches"),
    (("split attn", "split attention", "spl at", "resnest"), "ResNeSt split-attention: radix groups of a cardinal block weighted by softmax attention"),
    (("coord att", "coord attn", "coordinate attention"), "coordinate attention: channel attention factorised along height and width with positional information"),
    (("gather excite",), "gather-excite: aggregates context over a spatial extent and redistributes it as a gate"),
    (("spatial attention",), "spatial attention: a sigmoid mask over positions computed from pooled channel statistics"),
    (("channel attention",), "channel attention: per-channel weights computed from pooled features"),
    (("triplet attention",), "triplet attention: cross-dimension interaction through three rotated attention branches"),
    (("fourier transform", "f net fourier", "fnet fourier", "fourier mix"), "FNet: token mixing by an unparameterised 2D FFT (real part) in place of self-attention"),
    (("global filter",), "global filter layer: mixes tokens by multiplying their 2D Fourier transform with a learned filter"),
    (("mamba mixer", "mamba 2 mixer", "mamba", "selective scan", "ssm"), "Mamba: selective state-space model, input-dependent SSM parameters, causal depthwise convolution and SiLU gate"),
    (("rwkv",), "RWKV: linear-attention RNN with exponential time-decay (WKV) and time-mix shift, parallelisable training"),
    (("retention", "ret net"), "retention: recurrent attention with exponential decay, parallel in training and recurrent at inference"),
    (("hyena",), "Hyena: long implicit convolutions interleaved with gating as an attention replacement"),
    (("mixer block", "mlp mixer", "token mixing"), "MLP-Mixer block: an MLP across tokens then an MLP across channels"),
    (("pool former", "pooling mixer"), "PoolFormer: average pooling as the token mixer of a transformer-style block"),
    # -- position ------------------------------------------------------------------------------
    (("rotary", "rotary embedding", "rotary position embedding", "rope"), "RoPE: rotation of 2D sub-vectors of queries and keys by position-dependent angles, encoding relative position in dot products"),
    (("sinusoidal", "sinusoidal positional embedding", "sine position embedding", "position embedding sine", "positional encoding"), "sinusoidal encoding (Vaswani et al.): sin and cos of position times geometrically decreasing frequencies, no parameters"),
    (("learned positional embedding", "learned position embedding"), "learned absolute position embeddings, one vector per position"),
    (("alibi",), "ALiBi: attention biased by a head-specific linear penalty on the query-key distance"),
    (("positional conv embedding", "pos conv"), "convolutional position embedding: a wide grouped 1D convolution over time adds relative positional information (wav2vec 2.0, HuBERT)"),
    (("fourier features", "fourier embed", "fourier position", "random fourier"), "Fourier features: sin/cos of (random or learned) linear maps of coordinates"),
    (("timestep embedding", "timesteps", "timestep embedder", "time embedding"), "diffusion timestep embedding: a sinusoidal encoding of the noise step passed through a small MLP"),
    # -- convolution blocks -------------------------------------------------------------------
    (("depthwise separable", "separable conv", "sep conv", "ds conv", "depth wise separable"), "depthwise-separable convolution (MobileNet, Xception): depthwise convolution per channel then 1x1 convolution mixing channels"),
    (("inverted residual", "mb conv", "mbconv"), "inverted residual (MBConv): 1x1 expansion, depthwise convolution, 1x1 linear projection back, with a skip connection (MobileNetV2, EfficientNet)"),
    (("fused mb conv", "fused mbconv", "edge residual"), "fused MBConv: a full 3x3 expansion convolution replaces the 1x1 expansion and depthwise pair"),
    (("bottleneck",), "bottleneck residual block: 1x1 reduce, 3x3 convolution, 1x1 expand, added to a shortcut"),
    (("basic block",), "ResNet BasicBlock: 3x3 convolution, batch norm, ReLU, 3x3 convolution, batch norm, plus identity or projected shortcut"),
    (("conv next block", "conv next layer", "convnext"), "ConvNeXt block: 7x7 depthwise convolution, LayerNorm, 4x expansion pointwise MLP with GELU, layer scale, residual"),
    (("ghost module", "ghost bottleneck"), "Ghost module: a few ordinary feature maps plus cheap linear (depthwise) operations generate the rest"),
    (("rep vgg", "mobile one", "rep conv"), "structural re-parameterisation: parallel 3x3, 1x1 and identity branches in training fused into one convolution for inference"),
    (("dense layer", "dense block", "dense net"), "DenseNet layer: batch norm, ReLU, convolution, its output concatenated to all earlier features"),
    (("inception",), "Inception module: parallel convolutions of several kernel sizes and pooling, concatenated"),
    (("res 2 net", "bottle 2 neck"), "Res2Net: hierarchical residual connections among channel groups inside one block for multi-scale features"),
    (("deform conv", "deformable conv", "dcn", "modulated deform"), "deformable convolution (DCN): kernel sample positions displaced by offsets predicted from the input, bilinear sampling"),
    (("coord conv",), "CoordConv: convolution over inputs with extra coordinate channels"),
    (("involution",), "involution: a spatially specific, channel-shared kernel generated from each position's features"),
    (("octave conv",), "octave convolution: high- and low-frequency feature maps at two resolutions exchanging information"),
    (("cond conv", "dynamic conv", "dy conv", "odconv"), "dynamic convolution: the kernel is an input-dependent attention-weighted mix of several kernels"),
    (("mixed conv", "mix conv"), "mixed depthwise convolution: channel groups with different kernel sizes"),
    (("blur pool", "blur downsample", "anti alias", "anti aliasing"), "BlurPool (Zhang 2019): low-pass filtering before striding for shift-equivariant, anti-aliased downsampling"),
    (("pixel shuffle", "sub pixel", "upsample one step"), "PixelShuffle / sub-pixel convolution: channel-to-space rearrangement, C*r*r channels become an r-times larger map"),
    (("pixel unshuffle", "space to depth", "focus"), "space-to-depth / PixelUnshuffle / Focus: each r x r pixel neighbourhood moved into channels, lossless downsampling"),
    (("patch embed", "patch embedding", "patch embeddings", "patchify"), "patch embedding: tokenises an image (or volume) as fixed-size patches, each linearly projected, usually by a strided convolution"),
    (("patch merging",), "Swin patch merging: 2x2 neighbouring patch features concatenated and linearly reduced, downsampling the token grid"),
    (("conv bn act", "conv norm act", "conv norm activation", "conv module", "conv bn relu"), "convolution followed by normalisation and an activation"),
    (("drop path", "stochastic depth"), "stochastic depth (drop path): the residual branch is zeroed for random examples in training, identity at inference"),
    (("drop block",), "DropBlock: drops contiguous square regions of a feature map during training"),
    (("layer scale",), "LayerScale (CaiT): trainable diagonal matrix on each residual branch, entries starting near zero such as 1e-5"),
    (("stem",), "network stem: the first convolutions that reduce resolution before the stages"),
    (("shuffle net", "channel shuffle"), "channel shuffle: permutes channels between groups so grouped convolutions exchange information"),
    (("dilated", "atrous"), "dilated (atrous) convolution: a kernel with gaps that enlarges the receptive field without downsampling"),
    # -- detection and segmentation ------------------------------------------------------------
    (("fpn", "feature pyramid network"), "FPN: multi-scale feature maps from lateral 1x1 convolutions merged with upsampled coarser levels, each smoothed by a 3x3 convolution"),
    (("pafpn", "pa fpn", "panet", "path aggregation"), "PANet / PAFPN neck: FPN followed by a second, bottom-up path that propagates low-level detail upward"),
    (("bifpn", "bi fpn"), "BiFPN (EfficientDet): weighted bidirectional multi-scale fusion, repeated several times"),
    (("aspp", "atrous spatial pyramid pooling"), "ASPP (DeepLab): atrous convolutions with different dilation rates and a global pooling branch in parallel"),
    (("psp", "pyramid pooling", "ppm"), "PSPNet pyramid pooling: adaptive pooling to bins such as 1, 2, 3, 6, convolution, upsample, concatenation"),
    (("spp", "sppf", "spatial pyramid pooling"), "spatial pyramid pooling: max pooling at several kernel sizes concatenated (YOLO SPP/SPPF)"),
    (("anchor generator",), "anchor generator: prior boxes with multiple sizes and ratios tiled over each position of a feature map"),
    (("rpn", "region proposal", "rpn head"), "RPN (Faster R-CNN): objectness classification and anchor box refinement producing region proposals"),
    (("retina head", "retina net head", "fcos head", "anchor head", "atss head", "gfl head"), "one-stage dense head (RetinaNet, FCOS, ATSS): separate classification and regression convolution subnets shared over FPN levels"),
    (("roi align", "ro i align", "multi scale ro i align"), "RoIAlign (Mask R-CNN): region features by bilinear interpolation at exact sampling points, no rounding"),
    (("roi pool", "ro i pool"), "RoIPool: region features max-pooled on a quantised grid"),
    (("nms", "non maximum suppression"), "non-maximum suppression: removes boxes overlapping a higher-scoring box"),
    (("unet decoder", "decoder block", "up block"),"U-Net decoder: upsampling, concatenation with the matching encoder features, then convolutions"),
    (("unet", "u net"), "U-Net: an encoder-decoder with skip connections between matching resolutions"),
    (("mask head", "fcn mask head"), "mask head: convolutions and an upsampling layer predicting a binary mask per region"),
    (("channel mapper",), "channel mapper: 1x1 convolutions mapping every input level to the same channel count"),
    (("csp", "c 3", "c 2 f", "cross stage partial"), "cross stage partial block: splits channels, passes one part through bottlenecks and concatenates with the other"),
    (("yolo", "detect"), "YOLO detection head: per-level convolutions predicting boxes, objectness and classes for each anchor or point"),
    (("segformer", "mix ffn"), "SegFormer: hierarchical transformer with efficient attention and a lightweight all-MLP decoder"),
    (("upernet", "uper head"), "UPerNet: a feature pyramid plus pyramid pooling for unified scene parsing"),
    # -- losses ------------------------------------------------------------------------------------
    (("focal loss", "focal"), "focal loss (RetinaNet): modulating factor (1 - p_t)^gamma reduces the loss of easy examples, for foreground-background imbalance"),
    (("giou", "g iou"), "GIoU loss: IoU with a penalty from the enclosing box area outside the union"),
    (("diou", "ciou", "d iou", "c iou"), "distance or complete IoU loss: IoU penalised by the normalised centre distance (and aspect-ratio consistency)"),
    (("iou loss", "io u loss"), "IoU loss for bounding-box regression from the overlap of predicted and target boxes"),
    (("smooth l 1", "smooth l1", "huber"), "smooth L1 / Huber loss: L2 for small residuals, L1 for large ones"),
    (("dice",), "Dice loss: 1 - 2|A intersect B| / (|A| + |B|) on soft predictions, for segmentation"),
    (("dice ce", "dice focal"), "compound segmentation loss: soft Dice overlap plus cross entropy (or focal), common for 3D medical images"),
    (("lovasz",), "Lovasz-softmax / hinge loss: optimises mean IoU through the Lovasz extension of the Jaccard loss"),
    (("tversky",), "Tversky loss: generalised Dice with alpha and beta trading off FP and FN"),
    (("label smoothing",), "label smoothing: one-hot targets mixed with a uniform prior, epsilon-weighted"),
    (("soft target cross entropy", "soft target"), "soft-label cross entropy: targets are probability vectors, e.g. from mixup or cutmix"),
    (("jsd", "jensen shannon"), "AugMix JSD loss: Jensen-Shannon divergence among predictions for an image and its augmentations plus CE"),
    (("asymmetric loss",), "asymmetric loss for multi-label classification: separate focusing for positives and negatives, with negative probability shifting"),
    (("triplet",), "triplet margin loss: d(anchor, positive) - d(anchor, negative) + margin, hinged at zero"),
    (("contrastive", "info nce", "clip loss"), "contrastive loss: pulls matching pairs together and pushes other pairs apart"),
    (("ctc",), "CTC loss: sums over every valid alignment of frames to labels with a blank symbol (speech, OCR)"),
    (("kl div", "kullback leibler"), "Kullback-Leibler divergence loss between distributions"),
    (("ssim", "ms ssim"), "SSIM: luminance, contrast and structure comparison of two images in local windows"),
    (("psnr",), "peak signal-to-noise ratio between two images"),
    (("total variation", "tv loss"), "total variation (TV): L1 of horizontal and vertical pixel gradients, a smoothness prior for denoising"),
    (("perceptual loss", "lpips"), "perceptual loss: distance between deep features of two images"),
    # -- graphs --------------------------------------------------------------------------------------
    (("gcn conv", "gcn"), "GCN (Kipf and Welling): D^-1/2 (A + I) D^-1/2 X W propagation"),
    (("gat conv", "ga tv 2 conv", "gatv 2 conv", "gat"), "GAT: attention-weighted neighbourhood aggregation with LeakyReLU-scored edge coefficients, multi-head"),
    (("sage conv", "graph sage"),"GraphSAGE: mean, max or LSTM aggregation of neighbours, merged with each node's self features, inductive"),
    (("gin conv", "gine conv"),"GIN: (1 + eps) * x_i plus the neighbour sum, then an MLP; matches the WL test in power"),
    (("edge conv", "dynamic edge conv"), "EdgeConv / DGCNN: MLP on (x_i, x_j - x_i) with max aggregation; the kNN graph can be rebuilt in feature space each layer"),
    (("cheb conv", "chebyshev"), "ChebNet: K-order Chebyshev polynomial filters of the rescaled graph Laplacian"),
    (("rgcn conv", "fast rgcn conv", "rgcn"), "R-GCN: relation-specific transforms summed over edge types, basis or block decomposition"),
    (("transformer conv",), "graph transformer operator (UniMP): multi-head attention among neighbouring nodes, edge attributes added to keys and values"),
    (("point transformer",), "point transformer: vector self-attention over local point neighbourhoods with relative position encoding"),
    (("schnet", "cf conv", "interaction block"), "continuous-filter convolution (SchNet): filters generated from interatomic distances for molecules"),
    (("jumping knowledge",), "jumping knowledge networks: per-layer node embeddings merged by cat, max-pool or LSTM attention"),
    (("attentional aggregation", "global attention"), "attentional aggregation / global attention pooling: a gate network scores nodes, softmax per graph, weighted sum readout"),
    (("message passing",), "message passing: nodes aggregate messages computed from neighbours along edges"),
    (("appnp",), "APPNP: propagation by personalised PageRank after a prediction MLP"),
    (("pna conv", "pna"), "principal neighbourhood aggregation: several aggregators and degree scalers combined"),
    (("sg conv",), "simplified graph convolution: K propagation steps then one linear layer"),
    (("top k pooling", "sag pooling"), "graph pooling that keeps the top-scoring nodes"),
    (("graph norm",), "graph normalisation of node features per graph"),
    # -- image processing ----------------------------------------------------------------------------
    (("canny",), "Canny: Gaussian smoothing, gradients, thin edges by NMS, double threshold with hysteresis"),
    (("sobel", "spatial gradient"), "Sobel filter: 3x3 derivative kernels giving x and y image gradients"),
    (("laplacian",), "Laplacian filter: sum of second derivatives, responds at edges and blobs"),
    (("gaussian blur",), "Gaussian blur: convolution with a normalised 2D Gaussian, sigma and kernel size set"),
    (("median blur",), "median filter: non-linear denoising, each output is the neighbourhood median"),
    (("box blur",), "box blur: averages each pixel's neighbourhood"),
    (("bilateral",), "bilateral filter: smoothing with weights from both spatial closeness and colour similarity, keeping edges"),
    (("motion blur",), "motion blur: convolves with a line kernel of a given angle and length"),
    (("unsharp mask",), "unsharp masking: sharpens by adding the difference between the image and its blur"),
    (("clahe", "equalize", "equalization"), "histogram equalisation (CLAHE: contrast-limited adaptive equalisation on tiles)"),
    (("rgb to hsv", "hsv"), "colour conversion between RGB and hue, saturation, value"),
    (("rgb to hls", "hls"), "colour conversion between RGB and hue, lightness, saturation"),
    (("rgb to lab", "lab"), "colour conversion between RGB and CIE L*a*b*"),
    (("rgb to yuv", "yuv", "ycbcr"), "colour conversion between RGB and luma-chroma spaces"),
    (("rgb to grayscale", "grayscale"), "grayscale conversion: weighted sum of R, G and B into luma"),
    (("random affine",), "random affine augmentation: rotation, translation, scaling and shearing drawn at random"),
    (("warp perspective", "homography"), "projective warp: resamples an image under a 3x3 homography matrix"),
    (("warp affine",), "affine warp: resamples an image under a 2x3 affine matrix"),
    (("sift",), "SIFT: gradient-orientation histograms over a 4x4 grid of cells around a keypoint"),
    (("hard net", "hardnet", "tfeat", "sos net"), "learned local patch descriptor from a small CNN trained with hard negative mining"),
    (("harris", "corner harris"), "Harris detector: det(M) - k trace(M)^2 of the second-moment matrix"),
    (("gftt", "corner gftt"), "good features to track (Shi-Tomasi): the smaller eigenvalue of the structure tensor as corner response"),
    (("hessian",), "Hessian determinant response for blob and keypoint detection"),
    (("dilation",), "grey-scale dilation: maximum over a structuring element"),
    (("erosion",), "grey-scale erosion: minimum over a structuring element"),
    (("opening", "closing", "morphology", "top hat"), "morphology (opening, closing, gradient, top-hat) built from erosion and dilation"),
    (("color jitter", "colour jitter"), "augmentation: random brightness, contrast, saturation and hue"),
    (("zca",), "ZCA whitening of images"),
    # -- language, speech and multimodal ------------------------------------------------------------
    (("scaled word embedding",), "embedding lookup scaled by sqrt(d_model)"),
    (("pooler",), "BERT pooler: CLS hidden state through Linear and tanh"),
    (("lm prediction head", "mlm head", "only mlm head", "lm head"), "MLM head: Linear, GELU, LayerNorm, then a decoder to vocabulary scores, often tied to input embeddings"),
    (("mlp", "feed forward", "ffn"), "position-wise feed-forward network: two linear layers with an activation in between"),
    (("moe", "sparse moe", "experts", "sparse mlp", "router", "top k router"), "mixture of experts (MoE): a gating network picks a few expert MLPs per token (top-k routing) and combines them weighted"),
    (("conformer convolution", "conformer conv", "convolution module"), "Conformer convolution module: 1x1 convolution with GLU, depthwise convolution, BatchNorm, Swish, 1x1 convolution"),
    (("subsampler", "subsampling", "conv 1d subsampler", "conv subsampling"), "convolutional subsampling front end: strided convolutions reducing the frame rate of audio features"),
    (("feature encoder", "feature extractor"), "waveform feature encoder: stacked strided 1D convolutions over raw audio"),
    (("multi modal projector", "multimodal projector"), "multimodal projector / connector: MLP mapping vision or audio encoder outputs to LLM token embeddings (LLaVA)"),
    (("vector quantizer", "quantizer", "codebook", "vq"), "vector quantiser (VQ-VAE): nearest-codeword lookup with a straight-through gradient and commitment loss"),
    (("decoder layer",), "transformer decoder layer: causal self-attention, encoder-decoder attention where present, MLP"),
    (("encoder layer",), "transformer encoder layer: bidirectional self-attention and MLP sub-layers"),
    (("embedding bag",), "EmbeddingBag: pooled (sum, mean, max) embeddings of variable-length index sets without materialising them"),
    (("gru",), "GRU: gated recurrent unit with update gate z and reset gate r, hidden state only"),
    (("lstm",), "long short-term memory: input, forget and output gates with a memory cell"),
    (("gem", "generalized mean pool", "gen mean pool"), "GeM pooling: (mean of x^p)^(1/p) with a trainable p, from average (p=1) to max (p large)"),
    (("adaptive avg max pool", "adaptive cat avg max pool", "avg max pool"), "average and max global pooling: both pooled vectors added or concatenated"),
    # -- generative models -----------------------------------------------------------------------------
    (("resnet block 2d", "resnet block 3d", "resnet block cond norm 2d", "temporal resnet block"), "diffusion U-Net ResNet block: GroupNorm, SiLU, convolution, plus the time embedding injected between the convolutions"),
    (("basic transformer block", "transformer 2d model", "spatial transformer"), "latent diffusion transformer block: self-attention, cross-attention to text embeddings, feed-forward"),
    (("autoencoder kl", "var auto encoder", "variational auto encoder", "vae"),"VAE (KL autoencoder): Gaussian posterior with predicted mu and log-sigma-squared, reparameterised sampling, KL regulariser"),
    (("downsample 2d", "downsample 1d", "downsample 3d", "down block 2d"), "U-Net downsampling layer: a stride-2 convolution, or else 2x2 average pooling"),
    (("upsample 2d", "upsample 1d", "upsample 3d", "up block 2d"), "U-Net upsampling: nearest or transposed-convolution upsampling, optionally followed by a convolution"),
    (("control net",), "ControlNet: a trainable copy of the encoder conditioned on an extra image, added through zero-initialised convolutions"),
    (("unetr", "swin unetr"), "UNETR: a transformer encoder over 3D patches with a convolutional decoder for medical segmentation"),
    (("residual unit",), "residual unit: convolutions with normalisation and activation added to a (projected) shortcut"),
]


def _index() -> list[tuple[str, int]]:
    """Every key written without spaces (as :func:`_runs` writes a name), longest first. A key of
    two words or more also matches with its last word inflected (``generalized mean pool`` finds
    ``GeneralizedMeanPooling``, ``timestep embedding`` ``TimestepEmbeddings``); a one-word key
    does not, since short ones would then match other words (``gat`` in ``gating``, ``yolo`` in
    ``yolos``)."""
    keys = {(key.replace(" ", "") + ending, i) for i, (ks, _) in enumerate(_ENTRIES) for key in ks
            for ending in (("", "s", "ing") if " " in key else ("",))}
    return sorted(keys, key=lambda kv: (-len(kv[0]), kv[1]))


_KEYS = _index()


def _runs(words: str) -> set[str]:
    """Every run of consecutive words, written without spaces: a key is compared with these, so it
    matches however the class name's capitals split it (``ReLU6`` -> ``re lu 6``, ``ResNeSt`` ->
    ``res ne st``) as long as it starts and ends on a word boundary."""
    tokens = words.split()
    return {"".join(tokens[i:j]) for i in range(len(tokens)) for j in range(i + 1, len(tokens) + 1)}


@functools.lru_cache(maxsize=1 << 16)  # both text views of every block ask, and class names repeat
def techniques_of(words: str) -> tuple[int, ...]:
    """Which techniques ``words`` (a class name as ``split_words`` spells it) names, as indices
    into the glossary's entries, longest key first, at most ``_MAX_MATCHES``. Besides the name's
    own words, each abbreviation's spelled-out form is read on its own (``se`` -> ``squeeze
    excitation``); spelling abbreviations out in place (``spatial attn`` -> ``spatial
    attention``) was tried and gave generic parts the definitions their modules are searched by."""
    lowered = words.lower()
    runs = _runs(lowered).union(*(_runs(ABBREVIATIONS[w]) for w in set(lowered.split()) if w in ABBREVIATIONS))
    found: list[int] = []
    for key, entry in _KEYS:
        if key in runs and entry not in found:
            found.append(entry)
            if len(found) == _MAX_MATCHES:
                break
    return tuple(found)


def describe(words: str) -> list[str]:
    """Definitions of the techniques ``words`` names (:func:`techniques_of`)."""
    return [_ENTRIES[i][1] for i in techniques_of(words)]
