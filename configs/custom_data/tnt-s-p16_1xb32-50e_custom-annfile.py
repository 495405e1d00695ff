# TNT-S fine-tuned on your own images listed in annotation files
# (docs/custom_data.md): the folder recipe
# (tnt-s-p16_1xb32-50e_custom-folder.py) with the samples and labels read
# from lists. Data (placeholder paths under data/custom/cls_list):
#
#   data/custom/cls_list/images/...            # any layout, any names
#   data/custom/cls_list/meta/train.txt        # "<path under images/> <label>"
#   data/custom/cls_list/meta/val.txt
#   data/custom/cls_list/meta/classes.txt      # optional: one name a line
#
# A line such as `batch_3/0001.png 2` is an image and its class index
# (0-based, the position of the name in `classes`); the last space of a
# line separates the two. Grayscale files load as 3 equal channels.
_base_ = './tnt-s-p16_1xb32-50e_custom-folder.py'

# The class names, in label order (or the path of a file with one name a
# line, e.g. data_root + '/meta/classes.txt'); their number is num_classes.
classes = ('daisy', 'rose', 'tulip')
num_classes = len(classes)
data_root = 'data/custom/cls_list'

model = dict(head=dict(num_classes=num_classes))
data_preprocessor = dict(num_classes=num_classes)

train_dataloader = dict(
    dataset=dict(
        data_root=data_root,
        ann_file='meta/train.txt',
        data_prefix='images',
        classes=classes))
val_dataloader = dict(
    dataset=dict(
        data_root=data_root,
        ann_file='meta/val.txt',
        data_prefix='images',
        classes=classes))
test_dataloader = val_dataloader
