"""The run's config: its schema, its checks, the configs stored in checkpoints, sizing, building.

* `schema`: the structured configs of every group, registered with Hydra's ConfigStore;
* `search_settings`: how a search runs (`trainer.test_search`, the decoding options);
* `training_settings`: what the training loop reads of a run, typed (`TrainerSettings`);
* `value_checks`: the range checks of a composed config, before anything is prepared;
* `stored`: a checkpoint's config checked as untrusted data, and the migrations of old ones;
* `sizing`: the model's size found on the `meta` device before a byte is allocated;
* `build`: the model built from the config, only the project's own (or plugins') classes.
"""
