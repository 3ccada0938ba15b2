#pragma once
// The field declarations of the trainer's options (options_binding.hpp explains the
// protocol): the keys of the YAML `train:` section, of the resolved config.yaml and of the
// `tessera train` flags. TrainOptions' optimiser and augmentation fields sit flat in
// `train:` (train.learning_rate, train.augment_rotate90); the loss is `train.loss:`; the
// curriculum is a list `train.curriculum: [{epoch, tile}]`. TrainOptions::run_dir (a
// top-level key), progress and resume (flags only) are declared by the caller or not at all.
#include "tessera/core/options_binding.hpp"
#include "tessera/core/trainer.hpp"

namespace tessera {

inline void parse_value(const std::string& s, OptimizerKind& v) { v = parse_optimizer_kind(s); }
inline void parse_value(const std::string& s, ScheduleKind& v) { v = parse_schedule_kind(s); }
inline void parse_value(const std::string& s, LossKind& v) { v = parse_loss_kind(s); }
inline std::string value_name(OptimizerKind v) { return to_string(v); }
inline std::string value_name(ScheduleKind v) { return to_string(v); }
inline std::string value_name(LossKind v) { return loss_kind_name(v); }

template <class V>
void fields(OptimizerOptions& o, V& v) {
  v.field("optimizer", o.kind, "adam, adamw, sgd or rmsprop");
  v.field("learning_rate", o.learning_rate, "Peak learning rate (after warm-up)");
  v.field("momentum", o.momentum, "SGD and RMSProp momentum");
  v.field("weight_decay", o.weight_decay, "L2 (Adam, SGD, RMSProp) or decoupled (AdamW) weight decay");
  v.field("schedule", o.schedule, "Learning-rate schedule: constant, step, cosine or poly");
  v.field("warmup_steps", o.warmup_steps, "Linear learning-rate warm-up over this many steps");
  v.field("step_size", o.step_size, "step schedule: multiply by gamma every step_size steps");
  v.field("gamma", o.gamma, "step schedule factor");
  v.field("power", o.power, "poly schedule: (1 - t/T)^power");
  v.field("min_lr_fraction", o.min_lr_fraction, "cosine / poly schedules end at learning_rate x this");
}

template <class V>
void fields(LossOptions& o, V& v) {
  v.field("kind", o.kind, "ce, dice, dice_ce, focal or adaptive_dice_focal");
  v.field("dice_weight", o.dice_weight, "Weight of the Dice term (dice_ce, adaptive_dice_focal)");
  v.field("ce_weight", o.ce_weight, "Weight of the cross-entropy term (dice_ce)");
  v.field("focal_weight", o.focal_weight, "Weight of the focal term (adaptive_dice_focal)");
  v.field("focal_gamma", o.focal_gamma, "Focusing exponent, >= 0 (focal, adaptive_dice_focal)");
  v.field("smooth", o.smooth, "Dice smoothing added to numerator and denominator, >= 0");
  v.field("include_background", o.include_background, "Class 0 in the Dice mean");
  v.field("ignore_index", o.ignore_index, "Label value of pixels that count nowhere");
  v.field("class_weights", o.class_weights, "Weight per class, >= 0; empty = all 1");
}

template <class V>
void fields(TrainOptions::Augmentation& a, V& v) {
  v.field("augment_rotate90", a.rotate90, "Random 90-degree rotations in the last two axes");
  v.field("augment_intensity_scale", a.intensity_scale, "Intensity x s, s ~ U[1 - scale, 1 + scale]");
  v.field("augment_intensity_shift", a.intensity_shift, "Intensity + t, t ~ U[-shift, shift]");
  v.field("augment_gaussian_noise", a.gaussian_noise, "Gaussian noise sigma");
  v.field("augment_uniform_noise", a.uniform_noise, "Uniform noise U[-u, u]");
  v.field("augment_rotation", a.rotation, "Rotation by up to +-this many degrees (3-D: about every axis); labels nearest");
  v.field("augment_scaling", a.scaling, "Zoom z ~ U[1 - scaling, 1 + scaling]");
  v.field("augment_elastic", a.elastic, "Elastic deformation: displacement std in voxels (0: off)");
  v.field("augment_elastic_sigma", a.elastic_sigma, "Smoothing of the elastic displacement, voxels");
  v.field("augment_blur", a.blur, "Gaussian blur sigma ~ U[blur/2, blur] voxels");
  v.field("augment_contrast", a.contrast, "Contrast c ~ U[1 - contrast, 1 + contrast] about the tile's mean");
  v.field("augment_gamma", a.gamma, "Gamma ~ U[1 - gamma, 1 + gamma] on the tile's intensity range");
  v.field("augment_probability", a.probability, "Chance of each of rotation, scaling, elastic, blur, contrast, gamma per tile");
}

template <class V>
void fields(CurriculumStage& c, V& v) {
  v.field("epoch", c.from_epoch, "From this epoch (0-based) on");
  v.field("tile", c.tile, "train on tiles of this inset side");
}

template <class V>
void fields(TrainOptions& t, V& v) {
  v.field("tile", t.tile, "Training tile inset side (multiple of 2^(L-1))");
  v.field("batch", t.batch, "Tiles per step and data-parallel replica");
  v.field("accumulate", t.accumulate, "Micro-batches per optimiser step (gradients averaged)");
  v.field("steps", t.steps, "Optimiser steps");
  v.field("steps_per_epoch", t.steps_per_epoch, "Steps per epoch (validation, curriculum, early stopping)");
  v.field("seed", t.seed, "Seed for initialisation, tiles and augmentation");
  v.field("augment", t.augment, "Random flips along every spatial axis");
  fields(t.augmentation, v);
  v.field("sync_batch_norm", t.sync_batch_norm, "Batch-norm statistics over the global batch");
  v.field("foreground_fraction", t.foreground_fraction, "Share of tiles centred on a foreground class");
  v.field("deep_supervision", t.deep_supervision, "Losses at the decoder's lower levels too (nnU-Net; same padding)");
  v.field("checkpoint_every", t.checkpoint_every, "Steps between checkpoints");
  v.field("keep_last", t.keep_last, "Also keep step-NNNNNN.pt of the last N checkpoints");
  v.field("early_stopping", t.early_stopping, "Stop after this many epochs without a better validation Dice; 0 = off");
  v.field("prefetch", t.prefetch, "Batches read ahead of the network");
  v.field("channels_last", t.channels_last, "Channels-last weights and activations during training");
  v.field("precision", t.precision, "fp32, or bf16: mixed precision (forward under bfloat16 autocast)");
  v.field("grad_clip", t.grad_clip, "Max global L2 norm of the gradient; 0 = no clipping");
  v.field("scale_learning_rate", t.scale_learning_rate,
          "Multiply the learning rate by the replicas (default off: exact equivalence)");
  fields(t.optimizer, v);
  v.list("curriculum", t.curriculum, "Tile sides by epoch: [{epoch, tile}]");
  v.section("loss", t.loss, "The segmentation loss");
}

}  // namespace tessera
