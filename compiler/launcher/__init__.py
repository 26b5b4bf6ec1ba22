"""The launcher: the program every TensorFlow pod runs around its training command.

`program.py` is shipped to the pods as it is (the compiler reads its text from the installed
package and puts it in the job's launcher ConfigMap), so it imports nothing but the standard
library and keeps to the Python that TensorFlow images have (3.8 and later). Nothing in this
package is imported by the pods but `program.py` itself.
"""
